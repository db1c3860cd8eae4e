#include "api/webhooks/dispatcher.h"

#include <ctime>
#include <optional>
#include <random>

#include "api/http_client.h"
#include "api/webhooks/signature.h"
#include "base/log.h"

namespace gpupool::webhooks {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void JsonString(std::string* o, std::string_view s) {
  o->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      o->push_back('\\');
      o->push_back(c);
    } else if (u < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      *o += "\\u00";
      o->push_back(kHex[u >> 4]);
      o->push_back(kHex[u & 0xf]);
    } else {
      o->push_back(c);
    }
  }
  o->push_back('"');
}

}  // namespace

PostResult Post(const WebhookUrl& url, const std::string& body,
                const std::vector<std::pair<std::string, std::string>>& headers,
                const DispatcherOptions& o) {
  api::HttpClientOptions http;
  http.timeout = o.timeout;
  http.extra_ca_pem = o.extra_ca_pem;
  http.allow_loopback = o.allow_loopback;
  http.user_agent = "gpupoold-webhooks/1";
  http.max_body_bytes = 64 * 1024;  // the answer's body is not read further
  api::HttpExchangeResult r = api::HttpExchange("POST", url, headers, body, http);
  return PostResult{r.http_status, std::move(r.error)};
}

std::string DeliveryBody(const WebhookRecord& w, const LoggedEvent& e, int attempt) {
  std::string o = "{\"id\":";
  JsonString(&o, WebhookDeliveryId(w.id, e.id));
  o += ",\"webhook\":" + std::to_string(w.id) + ",\"tenant\":";
  JsonString(&o, w.tenant);
  o += ",\"attempt\":" + std::to_string(attempt) + ",\"event\":{\"id\":" + std::to_string(e.id) +
       ",\"kind\":";
  JsonString(&o, e.event.kind);
  o += ",\"subject\":";
  JsonString(&o, e.event.subject);
  o += ",\"message\":";
  JsonString(&o, e.event.message);
  o += ",\"tenant\":";
  JsonString(&o, e.event.tenant);
  o += ",\"time_us\":" + std::to_string(e.event.time_us) + "}}";
  return o;
}

WebhookDispatcher::WebhookDispatcher(WebhookStore* store, DispatcherOptions options)
    : store_(store), options_(std::move(options)) {}

WebhookDispatcher::~WebhookDispatcher() { Stop(); }

void WebhookDispatcher::Start() {
  {
    std::lock_guard lock(mu_);
    if (!stop_) return;
    stop_ = false;
  }
  poller_ = std::thread([this] { PollLoop(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { WorkLoop(); });
  }
}

void WebhookDispatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::lock_guard lock(mu_);
  queue_.clear();
  lanes_.clear();
}

void WebhookDispatcher::Poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

void WebhookDispatcher::PollLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    Result<std::vector<WebhookRecord>> all = store_->List("");
    lock.lock();
    if (!all.ok()) {
      LogWarn("webhooks", "cannot list webhooks", {{"error", all.status().ToString()}});
    } else {
      std::map<int64_t, Lane> kept;
      const auto now = std::chrono::steady_clock::now();
      for (const WebhookRecord& w : *all) {
        if (!w.enabled) continue;
        Lane& lane = kept[w.id];
        if (auto it = lanes_.find(w.id); it != lanes_.end()) {
          lane = it->second;
        } else {
          lane = Resume(w, now);
        }
        if (!lane.busy && lane.due <= now) {
          lane.busy = true;
          queue_.push_back(w.id);
        }
      }
      // A busy lane stays until its worker is done, even if its webhook went meanwhile.
      for (const auto& [id, lane] : lanes_) {
        if (lane.busy) kept.emplace(id, lane);
      }
      lanes_ = std::move(kept);
      cv_.notify_all();
    }
    cv_.wait_for(lock, options_.poll, [this] { return stop_ || poked_; });
    poked_ = false;
  }
}

void WebhookDispatcher::WorkLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const int64_t id = queue_.front();
    queue_.pop_front();
    const Lane before = lanes_[id];
    lock.unlock();
    Lane after = before;
    const SteadyTime due = Step(id, before, &after);
    lock.lock();
    after.busy = false;
    after.due = due;
    lanes_[id] = after;
    if (due <= std::chrono::steady_clock::now()) poked_ = true;
    cv_.notify_all();
  }
}

WebhookDispatcher::SteadyTime WebhookDispatcher::Step(int64_t id, Lane lane, Lane* out) {
  const auto now = [] { return std::chrono::steady_clock::now(); };
  const auto later = now() + options_.poll;
  Result<std::optional<WebhookRecord>> got = store_->Get(id);
  if (!got.ok() || !got->has_value() || !(*got)->enabled) return later;
  const WebhookRecord& w = **got;
  Result<WebhookUrl> url = ParseWebhookUrl(w.url, options_.allow_loopback, "url");
  Result<WebhookBacklog> backlog = store_->Backlog(id, options_.batch);
  if (!backlog.ok()) return later;
  for (const LoggedEvent& e : backlog->events) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return later;
    }
    if (lane.event_id == kResumedEvent) lane.event_id = e.id;  // Resume: the event it failed on
    if (lane.event_id != e.id) lane = Lane{false, {}, e.id, 0};
    ++lane.attempts;
    *out = lane;
    const std::string body = DeliveryBody(w, e, lane.attempts);
    const int64_t start_ms = NowMs();
    PostResult r;
    if (!url.ok()) {
      r.error = url.status().message();
    } else {
      const std::vector<std::pair<std::string, std::string>> headers = {
          {"Gpupool-Delivery", WebhookDeliveryId(w.id, e.id)},
          {"Gpupool-Event", e.event.kind},
          {"Gpupool-Signature", Sign(w.secret, start_ms / 1000, body)}};
      r = Post(*url, body, headers, options_);
    }
    WebhookAttempt a;
    a.webhook_id = w.id;
    a.event_id = e.id;
    a.attempt = lane.attempts;
    a.time_ms = start_ms;
    a.duration_ms = NowMs() - start_ms;
    a.http_status = r.http_status;
    a.error = r.error;
    const std::string status =
        r.http_status != 0 ? "HTTP " + std::to_string(r.http_status) : api::PrintableAscii(r.error);
    Result<WebhookRecord> now_w = store_->RecordAttempt(a, status);
    if (!now_w.ok()) {
      LogWarn("webhooks", "cannot record an attempt",
              {{"webhook", std::to_string(w.id)}, {"error", now_w.status().ToString()}});
      return later;
    }
    if (!a.ok()) return now() + Failed(*now_w);
  }
  if (backlog->covered_to > w.cursor) {
    Status st = store_->Advance(id, backlog->covered_to);
    if (!st.ok()) return later;
  }
  return static_cast<int>(backlog->events.size()) >= options_.batch ? now() : later;
}

std::chrono::milliseconds WebhookDispatcher::Backoff(int failures) const {
  // backoff_initial · 2^(failures − 1), at most backoff_max.
  std::chrono::milliseconds wait = options_.backoff_initial;
  for (int i = 1; i < failures && wait < options_.backoff_max; ++i) wait *= 2;
  return std::min(wait, options_.backoff_max);
}

WebhookDispatcher::Lane WebhookDispatcher::Resume(const WebhookRecord& w, SteadyTime now) const {
  Lane lane;
  if (w.failures <= 0) return lane;
  // Failures do not move the cursor, so they were all of the first event after it: its attempts
  // go on counting from there, and the next waits what the schedule asked, at least its shortest
  // (jittered) wait after the last attempt — not at once because this dispatcher is new.
  lane.attempts = w.failures;
  lane.event_id = kResumedEvent;
  const int64_t wait_ms = Backoff(w.failures).count() / 2 - (NowMs() - w.last_attempt_ms);
  lane.due = now + std::chrono::milliseconds(std::max<int64_t>(0, wait_ms));
  return lane;
}

std::chrono::milliseconds WebhookDispatcher::Failed(const WebhookRecord& w) {
  const int64_t span_ms = NowMs() - w.first_failure_ms;
  if (w.failures >= options_.disable_after_failures && span_ms >= options_.disable_after.count()) {
    const std::string reason = std::to_string(w.failures) + " deliveries failed in a row over " +
                               std::to_string(span_ms / 1000) + " s; the last: " + w.last_status;
    Status st = store_->SetEnabled(w.id, false, reason);
    if (st.ok()) {
      LogWarn("webhooks", "webhook disabled",
              {{"webhook", std::to_string(w.id)}, {"tenant", w.tenant}, {"reason", reason}});
      if (options_.on_disabled) options_.on_disabled(w, reason);
    }
    return options_.poll;
  }
  // A random 50–100 % of the backoff.
  const std::chrono::milliseconds wait = Backoff(w.failures);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> jitter(wait.count() / 2,
                                                std::max<int64_t>(wait.count(), 1));
  return std::chrono::milliseconds(jitter(rng));
}

}  // namespace gpupool::webhooks
