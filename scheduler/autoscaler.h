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
// tick while the backlog grows (the spiral the twin shows for concurrency-sized policies). The
// backlog adds only what drains it within `drain_ms` (it still grows with the backlog while
// replicas load: the twin measured holding it back then costs more late requests than it saves
// GPU time).
//
// The rule (issue 26):
//  - **Up, fast.** The offered load averaged over `burst_window_ms` (2 s) plus the backlog's
//    drain asks for ⌈load / target⌉ replicas. When that is more than the service holds — ready,
//    starting and loading replicas all count — and the load is past the held count's target by
//    more than `tolerance`, the service goes up at once to that count. A request held at zero
//    replicas asks for one at once.
//  - **Down, slowly.** Only to what the last `stable_window_ms` (60 s) needs: its mean offered
//    load, and never so few that its peak (with `down_headroom` on top) would have asked for a
//    step up at the new count; not while a request is held, and not within `stable_window_ms` of
//    the last step up. A load that wobbles around a boundary does not make the service
//    oscillate, and under a steady load the direction changes at most once per stable window.
//  - **To zero** only after `idle_to_zero_ms` with no request at all, and only when `min` is 0.
//  - Always within [min, max].
// Each decision carries its reason, for people (`Service` status, logs); nothing parses it.
//
// Thread safety: none; one owner at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "base/status.h"

namespace gpupool {

struct AutoscalerOptions {
  int32_t min_replicas = 0;
  int32_t max_replicas = 1;
  double target_in_flight = 1;        // requests in flight per replica the service is sized for
  int64_t burst_window_ms = 2'000;    // the load averaged over this decides a step up
  int64_t stable_window_ms = 60'000;  // a step down follows this window's mean and peak
  int64_t idle_to_zero_ms = 300'000;  // no request at all this long: zero replicas (min 0 only)
  int64_t drain_ms = 2'000;           // held requests are given replicas to drain in this time
  double tolerance = 0.10;            // a step up needs load above the held count's target by this
  double down_headroom = 0.20;  // a step down leaves the window's peak this far below a step up

  // The field that is wrong, named; OK when the options make sense.
  Status Check() const;
};

// One tick of the gateway's view of a service.
struct ServiceLoadSample {
  double in_flight = 0;       // requests being served
  double queued = 0;          // requests held for a replica
  double arrivals_per_s = 0;  // requests that arrived per second since the last sample
  double service_s = 0;       // mean time a replica took per request lately (0: not known yet)
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
    double load;  // offered load, in requests in flight
  };
  // The burst window's mean offered load.
  double BurstLoad(int64_t now_ms) const;
  int32_t Clamp(int64_t replicas) const;

  AutoscalerOptions options_;
  std::deque<Point> burst_;   // offered load per sample, over the burst window
  std::deque<Point> stable_;  // the burst window's mean at each decision, over the stable window
  double stable_sum_ = 0;
  double queued_ = 0;             // the last sample's held requests
  double service_s_ = 0;          // the last known mean service time
  int64_t last_request_ms_ = -1;  // the last sample with any request (-1: none yet)
  int64_t last_up_ms_ = INT64_MIN / 2;
};

}  // namespace gpupool
