// WebhookDispatcher: delivers tenants' events to their webhooks (scheduler/webhooks.h,
// docs/webhooks.md). It runs on threads of its own, in the leading gpupoold only, and touches the
// scheduler not at all: it follows the event log through the WebhookStore, so the scheduler never
// waits for an endpoint, and a slow endpoint delays only its own webhook.
//
// Per webhook, one delivery is in flight at a time, in event order: the next event is sent only
// once the one before it was answered 2xx (the cursor then moves, durably). A delivery is
//   POST <url>  Content-Type: application/json
//   Gpupool-Delivery: <webhook id>-<event id>   (the same for every attempt: receivers dedupe)
//   Gpupool-Event: <kind>
//   Gpupool-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//   {"id":"<delivery id>","webhook":<id>,"tenant":"…","attempt":<n>,
//    "event":{"id":…,"kind":"…","subject":"…","message":"…","tenant":"…","time_us":…}}
// An answer other than 2xx within the timeout, or none, is a failure: the webhook waits
// backoff_initial, doubling to backoff_max, with jitter, and tries the same event again. After
// at least disable_after_failures consecutive failures spanning at least disable_after, it is
// disabled with the reason (the last status) stored for its tenant to read; re-enabling resumes
// from its cursor. Every attempt is recorded (the store keeps the latest). The schedule survives a
// restart: a dispatcher that starts (a restarted or newly elected leader) waits, for a webhook
// with stored failures, at least the shortest jittered backoff after its last attempt, and goes
// on counting that event's attempts.
//
// Thread safety: Start and Stop from one thread; Poke from any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/webhooks.h"

namespace gpupool::webhooks {

struct DispatcherOptions {
  std::chrono::milliseconds poll{1000};      // how often the webhooks are looked at
  std::chrono::milliseconds timeout{10000};  // one attempt, from connect to the answer
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{std::chrono::minutes(5)};
  int disable_after_failures = 10;
  std::chrono::milliseconds disable_after{std::chrono::hours(24)};
  int workers = 4;  // deliveries in flight at once (to different webhooks)
  int batch = 100;  // events read per look at one webhook
  // PEM certificates trusted beside the system's (a private CA, tests).
  std::string extra_ca_pem;
  // Endpoints on loopback or link-local addresses (169.254.0.0/16: cloud metadata) are refused
  // unless this is set (tests, demos); so is http://, which also needs a loopback host.
  bool allow_loopback = false;
  // Called (on a dispatcher thread) when a webhook is disabled, with the reason: for the audit.
  std::function<void(const WebhookRecord&, const std::string& reason)> on_disabled;
};

// The outcome of one POST.
struct PostResult {
  int http_status = 0;  // 0: no answer (error says why)
  std::string error;    // "" for a 2xx
};

// One POST of `body` to `url` with `headers`, within `o.timeout`, verifying the server's
// certificate for the URL's host against the system's CAs and o.extra_ca_pem.
PostResult Post(const WebhookUrl& url, const std::string& body,
                const std::vector<std::pair<std::string, std::string>>& headers,
                const DispatcherOptions& o);

// The JSON body of the delivery of `e` to webhook `w`.
std::string DeliveryBody(const WebhookRecord& w, const LoggedEvent& e, int attempt);

class WebhookDispatcher {
 public:
  // REQUIRES: `store` outlives this.
  WebhookDispatcher(WebhookStore* store, DispatcherOptions options);
  ~WebhookDispatcher();  // Stop()s

  void Start();
  // Waits for the attempts in flight (at most one timeout).
  void Stop();
  // Looks at every webhook now rather than at the next poll.
  void Poke();

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  struct Lane {
    bool busy = false;
    SteadyTime due{};
    int64_t event_id = 0;  // the event being tried, and how often so far
    int attempts = 0;
  };

  void PollLoop();
  void WorkLoop();
  // One look at webhook `id`: delivers its backlog in order until a failure. Returns when it
  // should be looked at again (now when there is more, later after a failure).
  SteadyTime Step(int64_t id, Lane lane, Lane* out);
  // Records a failure of `w`; disables it when it has failed long enough. The backoff's wait.
  std::chrono::milliseconds Failed(const WebhookRecord& w);
  // The backoff after `failures` consecutive failures, before jitter.
  std::chrono::milliseconds Backoff(int failures) const;
  // The lane of a webhook this dispatcher has not looked at yet: from its stored failures and
  // last attempt, so that a restarted (or newly elected) leader keeps the retry schedule.
  Lane Resume(const WebhookRecord& w, SteadyTime now) const;
  static constexpr int64_t kResumedEvent = -1;

  WebhookStore* const store_;
  const DispatcherOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;     // the poller waits on it; so do workers for the queue
  bool stop_ = true;               // guarded by mu_
  bool poked_ = false;             // guarded by mu_
  std::map<int64_t, Lane> lanes_;  // guarded by mu_
  std::deque<int64_t> queue_;      // guarded by mu_: lanes to step
  std::thread poller_;
  std::vector<std::thread> workers_;
};

}  // namespace gpupool::webhooks
