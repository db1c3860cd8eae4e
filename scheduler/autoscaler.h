// Autoscaler: how many replicas an inference service should have, from what its gateway sees of
// the requests — never from GPU utilization (a GPU at 15 % may be a replica at its latency limit,
// and a saturated one may be idle in between).
//
// One Autoscaler per service; the caller (the scheduler on its clock, the twin on its simulated
// one) feeds it one sample per tick with Observe() and asks Decide() for the replica count. It is
// deterministic and does no I/O: time is the caller's.
//
// What it sizes for is the **offered load**: the arrival rate times the mean time a replica takes
// per request (Little's law: the requests in flight the arrivals need), both measured by the
// gateway — not the queue. A queue that builds while new replicas load is a backlog they drain
// in seconds once ready; sizing on it would order a replica per held request, and more every
// tick while the backlog grows (the spiral the twin shows for concurrency-sized policies). Held
// requests add only what drains them within `drain_ms`, and only those the ready replicas'
// spare slots would not drain anyway and that stayed held for `held_persist_ms` (a queue that
// empties within a second is the load's noise, not a shortage). While nothing is served yet (a
// cold start), the backlog is projected to the moment the replicas will be ready, from the last
// cold start measured (none yet: as long again as it has lasted), within the gateway's hold:
// asking for replicas one by one as the backlog grows makes each later one ready later.
//
// Arrivals are noisy: over 2 s, 20 requests/s vary by ±22 % (one standard deviation), so a rule
// that steps up at 10 % over the target flaps all day (the twin counted 849 direction changes in
// a day of six services). Each rule below allows for the noise of Poisson arrivals at the rate
// it tests: σ = √(load × service_s / window_s), in requests in flight.
//
// The rule (issue 26):
//  - **Up, fast, past the noise.** Three windows of the offered load: the burst window (2 s,
//    with the held requests' drain) and 5× it (10 s) step up when past the held count's target
//    by `tolerance` plus `noise_sigmas` σ; the stable window (60 s) when past the target by
//    `stable_sigmas` σ (a slow rise). Replicas still loading count as held. While replicas
//    serve, a step of the burst window goes to the least count at which what it saw would not
//    have stepped up (a noisy peak asks for one replica more, a real step for most of what it
//    needs, the 10 s window for the rest); the longer windows, and a cold start, go to what
//    their load (and the projected backlog) needs. A request held at zero replicas asks at once.
//  - **Down, slowly.** Only to a count whose target is `down_margin` above the stable window's
//    mean and at which no peak of the burst and 10 s windows over that window would have
//    stepped up within `down_sigmas` σ; not while a request is held, and not within
//    `stable_window_ms` of the last step up.
//  - **A count that fell short is not gone back to.** A step up from a count the service had
//    held for a whole stable window marks that count short at that load; for `relapse_ms` the
//    service goes back to it only once the stable load is `relapse_margin` below. Targets are
//    means, and a replica with few slots queues well below its target (Erlang's formulas): the
//    queue teaches the count that holds, and the service stops learning it again every few
//    minutes.
//  - **To zero** only after `idle_to_zero_ms` with no request at all, and only when `min` is 0.
//  - Always within [min, max].
// Each decision carries its reason, for people (`Service` status, logs); nothing parses it.
//
// Thread safety: none; one owner at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "base/status.h"

namespace gpupool {

struct AutoscalerOptions {
  int32_t min_replicas = 0;
  int32_t max_replicas = 1;
  double target_in_flight = 1;        // requests in flight per replica the service is sized for
  int64_t burst_window_ms = 2'000;    // the load averaged over this decides a fast step up
  int64_t stable_window_ms = 60'000;  // a step down follows this window's mean and peaks
  int64_t idle_to_zero_ms = 300'000;  // no request at all this long: zero replicas (min 0 only)
  int64_t drain_ms = 2'000;           // held requests are given replicas to drain in this time
  int64_t held_persist_ms = 1'000;    // ...when some stayed held this long
  int64_t hold_ms = 60'000;           // the gateway's longest hold of a request
  double tolerance = 0.10;            // a fast step up needs load above the target by this...
  double noise_sigmas = 3;            // ...and by this many σ of its window's Poisson noise
  double stable_sigmas = 1;           // the stable window's mean steps up this far past target
  double down_margin = 0.15;          // a step down leaves the stable mean this far under target
  double down_sigmas = 1;             // ...and the window's peaks this many σ under a step up
  int64_t relapse_ms = 7'200'000;     // a count that fell short is remembered this long...
  double relapse_margin = 0.35;       // ...and gone back to only this far below its load

  // The field that is wrong, named; OK when the options make sense.
  Status Check() const;
};

// One tick of the gateway's view of a service.
struct ServiceLoadSample {
  double in_flight = 0;       // requests being served
  double queued = 0;          // requests held for a replica
  double arrivals_per_s = 0;  // requests that arrived per second since the last sample
  double service_s = 0;       // mean time a replica took per request lately (0: not known yet)
  double cold_start_s = 0;    // how long the last cold start held its first request (0: none yet)
};

struct AutoscaleDecision {
  int32_t replicas = 0;
  std::string reason;
};

class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options);

  // The gateway's view at `now_ms`. Samples come in time order.
  void Observe(int64_t now_ms, const ServiceLoadSample& sample);

  // The count the service should have at `now_ms`, given `current` replicas (ready, starting or
  // loading: every replica it holds).
  AutoscaleDecision Decide(int64_t now_ms, int32_t current);

  const AutoscalerOptions& options() const { return options_; }

 private:
  struct Point {
    int64_t at_ms;
    double value;
  };
  // The mean of the samples of the last `span_ms`, and the highest such mean over `peak_ms`.
  class Window {
   public:
    Window(int64_t span_ms, int64_t peak_ms) : span_ms_(span_ms), peak_ms_(peak_ms) {}
    void Add(int64_t now_ms, double value);
    double mean() const { return samples_.empty() ? 0 : sum_ / double(samples_.size()); }
    double peak() const { return peaks_.empty() ? 0 : peaks_.front().value; }
    int64_t span_ms() const { return span_ms_; }

   private:
    int64_t span_ms_, peak_ms_;
    std::deque<Point> samples_;
    double sum_ = 0;
    std::deque<Point> peaks_;  // means, decreasing: the front is the highest
  };
  // How one window of the offered load steps up.
  struct Trigger {
    const Window* window;
    double load;
    double tolerance;
    double sigmas;
  };
  // The mean service time, 1 s until the gateway has measured one.
  double ServiceS() const;
  // One standard deviation of the offered load `load` seen through a window of `span_ms`.
  double Noise(double load, int64_t span_ms) const;
  // The load past which `replicas` step up, seen through a window of `span_ms`.
  double UpThreshold(int64_t replicas, int64_t span_ms, double tolerance, double sigmas) const;
  // The least count whose UpThreshold is at or above `load`.
  int64_t CountFor(double load, int64_t span_ms, double tolerance, double sigmas) const;
  // The held requests' share of the load: what drains them within drain_ms.
  double DrainLoad(int64_t now_ms) const;
  // The least count at least `current` would keep: the stable mean, the peaks and the counts
  // that fell short.
  int64_t DownFloor(int64_t now_ms, int32_t current, double fast) const;
  void RememberShort(int64_t now_ms, int32_t current);
  int32_t Clamp(int64_t replicas) const;

  AutoscalerOptions options_;
  Window burst_, mid_, stable_;     // offered load, in requests in flight
  std::deque<Point> held_least_;    // held requests, increasing: the front is the least lately
  double queued_ = 0;               // the last sample's held requests
  double in_flight_ = 0;            // the last sample's requests being served
  double service_s_ = 0;            // the last known mean service time
  double cold_start_s_ = 0;         // the last known cold start
  int64_t unserved_since_ms_ = -1;  // requests held and none served since (-1: not so)
  int64_t last_request_ms_ = -1;    // the last sample with any request (-1: none yet)
  int64_t last_up_ms_ = INT64_MIN / 2;
  struct Short {
    double load;    // the least stable load the count fell short at
    int64_t at_ms;  // when it last did
  };
  std::map<int32_t, Short> short_;  // by count
};

}  // namespace gpupool
