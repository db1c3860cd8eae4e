#include "api/jwks_cache.h"

#include "api/http_client.h"
#include "base/log.h"

namespace gpupool::api {

JwksCache::JwksCache(JwksCacheOptions options, Fetch fetch)
    : options_(std::move(options)), fetch_(std::move(fetch)) {}

JwksCache::~JwksCache() { Stop(); }

void JwksCache::Start() {
  {
    std::lock_guard lock(mu_);
    if (!stop_) return;
    stop_ = false;
    wanted_ = true;
  }
  thread_ = std::thread([this] { Loop(); });
}

void JwksCache::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<Jwk> JwksCache::Matching(std::string_view kid) const {
  if (kid.empty()) return keys_;
  for (const Jwk& k : keys_) {
    if (k.kid == kid) return {k};
  }
  return {};
}

std::vector<Jwk> JwksCache::KeysFor(std::string_view kid) {
  std::unique_lock lock(mu_);
  std::vector<Jwk> keys = Matching(kid);
  if (!keys.empty() || stop_) return keys;
  const auto now = std::chrono::steady_clock::now();
  const bool in_flight = wanted_;
  if (!in_flight && fetches_ > 0 && now - last_start_ < options_.min_refetch) return keys;
  if (!in_flight) {
    wanted_ = true;
    cv_.notify_all();
  }
  const int64_t seen = fetches_;
  cv_.wait_for(lock, options_.wait_for_fetch, [&] { return stop_ || fetches_ > seen; });
  return Matching(kid);
}

Result<OidcDiscovery> JwksCache::Discovery() const {
  std::lock_guard lock(mu_);
  if (!discovery_) {
    return Status::Unavailable("the identity provider's discovery document: " + last_error_);
  }
  return *discovery_;
}

int64_t JwksCache::fetches() const {
  std::lock_guard lock(mu_);
  return fetches_;
}

Status JwksCache::FetchOnce() {
  const std::string discovery_url = options_.issuer + "/.well-known/openid-configuration";
  Result<std::string> doc = fetch_(discovery_url);
  if (!doc.ok()) return Status::Unavailable(discovery_url + ": " + doc.status().message());
  Result<OidcDiscovery> d = ParseOidcDiscovery(*doc, options_.issuer);
  if (!d.ok()) return Status::Unavailable(discovery_url + ": " + d.status().message());
  Result<std::string> set = fetch_(d->jwks_uri);
  if (!set.ok()) return Status::Unavailable(d->jwks_uri + ": " + set.status().message());
  Result<std::vector<Jwk>> keys = ParseJwks(*set);
  if (!keys.ok()) return Status::Unavailable(d->jwks_uri + ": " + keys.status().message());
  std::lock_guard lock(mu_);
  std::string before, after;
  for (const Jwk& k : keys_) before += (before.empty() ? "" : ",") + k.kid;
  for (const Jwk& k : *keys) after += (after.empty() ? "" : ",") + k.kid;
  if (before != after || !discovery_) {
    LogInfo("oidc", "identity provider's signing keys loaded",
            {{"issuer", options_.issuer}, {"kids", after}});
  }
  discovery_ = std::move(d).value();
  keys_ = std::move(keys).value();
  return Status::Ok();
}

void JwksCache::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    wanted_ = true;  // a fetch is in flight: waiting verifications count on it
    last_start_ = std::chrono::steady_clock::now();
    lock.unlock();
    const Status st = FetchOnce();
    lock.lock();
    ++fetches_;
    wanted_ = false;
    if (!st.ok()) {
      if (last_error_ != st.message()) {
        LogWarn("oidc", "cannot fetch the identity provider's keys (keeping the ones held)",
                {{"issuer", options_.issuer}, {"error", st.ToString()}});
      }
      last_error_ = st.message();
    } else {
      last_error_.clear();
    }
    cv_.notify_all();
    const auto wait = st.ok() ? options_.refresh : options_.retry;
    cv_.wait_for(lock, wait, [&] { return stop_ || wanted_; });
  }
}

JwksCache::Fetch HttpFetcher(std::chrono::milliseconds timeout, std::string extra_ca_pem) {
  return [timeout, ca = std::move(extra_ca_pem)](const std::string& url) -> Result<std::string> {
    Result<WebhookUrl> parsed = ParseWebhookUrl(url, /*allow_insecure_loopback=*/true, "url");
    if (!parsed.ok()) return parsed.status();
    HttpClientOptions o;
    o.timeout = timeout;
    o.extra_ca_pem = ca;
    o.allow_loopback = true;
    o.max_body_bytes = 256 * 1024;
    o.user_agent = "gpupoold-oidc/1";
    HttpExchangeResult r = HttpExchange("GET", *parsed, {{"Accept", "application/json"}}, "", o);
    if (!r.error.empty()) return Status::Unavailable(r.error);
    return std::move(r.body);
  };
}

}  // namespace gpupool::api
