// JwksCache: the identity provider's signing keys, fetched from its JWKS endpoint and kept fresh
// (docs/security.md, "OIDC bearer tokens"). gpupoold reads <issuer>/.well-known/openid-
// configuration (OpenID Connect Discovery 1.0 §4), then the jwks_uri it names, on a thread of its
// own: at Start, every `refresh`, after a failure every `retry`, and when a token names a key id
// the cache does not have — a rotation — at most once per `min_refetch`, so that a stream of
// tokens with made-up key ids cannot make gpupoold hammer the provider. A verification that finds
// no key for its kid waits up to `wait_for_fetch` for that refetch, then is refused.
//
// A failed fetch keeps the keys it had (an outage of the provider does not sign anyone out) and is
// logged; keys the provider stops publishing are dropped at the next successful fetch. The
// discovery document is kept too: the console's sign-in reads the provider's endpoints from it.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/jwks.h"
#include "base/status.h"

namespace gpupool::api {

struct JwksCacheOptions {
  std::string issuer;  // https://… (http:// only on a loopback host)
  std::chrono::milliseconds refresh{std::chrono::minutes(10)};
  std::chrono::milliseconds retry{std::chrono::seconds(5)};
  std::chrono::milliseconds min_refetch{std::chrono::seconds(30)};
  std::chrono::milliseconds wait_for_fetch{std::chrono::seconds(2)};
};

class JwksCache {
 public:
  // GETs `url`, answering its body or why it could not.
  using Fetch = std::function<Result<std::string>(const std::string& url)>;

  // REQUIRES: `fetch` is set (HttpFetcher below in production).
  JwksCache(JwksCacheOptions options, Fetch fetch);
  ~JwksCache();  // Stop()s
  JwksCache(const JwksCache&) = delete;
  JwksCache& operator=(const JwksCache&) = delete;

  void Start();
  void Stop();

  // The keys a token with key id `kid` may be signed with: the key of that id, or every key when
  // the token names none. When there is none, asks for a refetch (rate-limited, above) and waits
  // for it up to wait_for_fetch.
  std::vector<Jwk> KeysFor(std::string_view kid);

  // The provider's discovery document, once fetched; UNAVAILABLE with the last error before.
  Result<OidcDiscovery> Discovery() const;

  // Fetches completed so far, successful or not (tests).
  int64_t fetches() const;

 private:
  void Loop();
  // One fetch of the discovery document and the keys; the error says which failed.
  Status FetchOnce();
  std::vector<Jwk> Matching(std::string_view kid) const;  // REQUIRES: mu_ held

  const JwksCacheOptions options_;
  const Fetch fetch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = true;                                  // guarded by mu_
  bool wanted_ = false;                               // guarded by mu_: a refetch is asked for
  int64_t fetches_ = 0;                               // guarded by mu_
  std::chrono::steady_clock::time_point last_start_;  // guarded by mu_: of the latest fetch
  std::optional<OidcDiscovery> discovery_;            // guarded by mu_
  std::vector<Jwk> keys_;                             // guarded by mu_
  std::string last_error_ = "not fetched yet";        // guarded by mu_
  std::thread thread_;
};

// A Fetch over api/http_client.h: GET with `timeout`, trusting `extra_ca_pem` beside the system's
// CAs; loopback hosts are allowed (the operator names the provider), http:// only for them.
JwksCache::Fetch HttpFetcher(std::chrono::milliseconds timeout, std::string extra_ca_pem);

}  // namespace gpupool::api
