// Autoscale replay: inference services' request load on a simulated clock, served by replicas
// that a scaling policy adds and removes, to compare gpupool's autoscaler
// (scheduler/autoscaler.h) with the policies its peers ship, re-implemented here from their
// documentation (issue 26):
//  - **kpa**: Knative's KPA — concurrency averaged over a 60 s stable window, a 6 s panic window
//    (10 % of it); panic when the panic window asks for ≥ 2× the current count, and no step down
//    while panicking or for 60 s after; at most halving per 2 s tick; scale to zero after the
//    stable window saw no request (knative.dev/docs/serving/autoscaling/kpa-specific/).
//  - **hpa**: Kubernetes' HPA on a per-replica in-flight metric — every 15 s, ⌈current × metric /
//    target⌉ outside a 10 % tolerance; up at most max(double, +4) per period; down to the highest
//    recommendation of the last 300 s; never below one replica (scale to zero is an alpha gate)
//    (kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/).
//  - **ray**: Ray Serve — ongoing requests averaged over a 30 s look-back; up when the ask stayed
//    above the count for 30 s (at once from zero), down when it stayed below for 600 s
//    (docs.ray.io/en/latest/serve/advanced-guides/advanced-autoscaling.html).
//
// The load (one model per service): requests arrive as a Poisson process at a rate that follows
// the synthetic GPU cloud's diurnal curve (twin/synthetic.h), with step bursts in the bursty
// workload and long silences in the sparse one; each takes `service_s` on a replica, which
// serves `slots` at once; every policy sizes for `target_in_flight` per replica. A new replica
// holds its GPU slice from its start and serves only after `cold_start_s` (loading its model).
// Requests wait in one FIFO queue at the gateway (held, never dropped). A request is late when it
// waited longer than `deadline_s` before a replica took it.
//
// Pure: no I/O, no threads; the same seed gives the same report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/autoscaler.h"

namespace gpupool::twin {

struct ServiceLoad {
  std::string name;
  double peak_rps = 50;    // requests per second at the diurnal peak
  double peak_hour = 14;   // DiurnalFactor's peak
  double service_s = 0.5;  // one request's time on a replica
  int32_t slots = 4;       // requests a replica serves at once
  // What every policy sizes for: 70 % of the slots, Knative's default target utilization, so a
  // replica has room for the load's noise before requests queue.
  double target_in_flight = 2.8;
  double cold_start_s = 20;  // a new replica's load time before it serves
  double gpu_per_replica = 0.25;
  double deadline_s = 1;  // a request held longer than this is late
  int32_t min_replicas = 0;
  int32_t max_replicas = 64;
  // Step bursts (bursty workload): [start, end) in seconds, the rate multiplied by `factor`.
  struct Burst {
    int64_t start_s = 0;
    int64_t end_s = 0;
    double factor = 1;
  };
  std::vector<Burst> bursts;
  // Silences (sparse workload): [start, end) with no request at all.
  std::vector<Burst> silences;
};

// diurnal | bursty | sparse: `services` services over `hours` hours, drawn from `seed`.
Result<std::vector<ServiceLoad>> AutoscaleWorkload(const std::string& name, int services,
                                                   int64_t hours, uint64_t seed);

// One policy's view, once per tick: what the gateway sees (gpupool's autoscaler sizes on the
// arrival rate × service time, the peers on requests in flight and held, as their documentation
// says) and every replica the service holds.
class ScalingPolicy {
 public:
  virtual ~ScalingPolicy() = default;
  virtual int32_t Tick(int64_t now_ms, const ServiceLoadSample& seen, int32_t current) = 0;
};

// gpupool | kpa | hpa | ray, for `load`'s bounds and target.
Result<std::unique_ptr<ScalingPolicy>> MakeScalingPolicy(const std::string& name,
                                                         const ServiceLoad& load);
inline const std::vector<std::string>& ScalingPolicyNames() {
  static const std::vector<std::string> kNames = {"gpupool", "kpa", "hpa", "ray"};
  return kNames;
}

struct AutoscaleResult {
  std::string policy;
  double gpu_seconds = 0;  // replica time × its slice, loading included
  int64_t requests = 0;
  int64_t late = 0;               // waited past the deadline (or never served)
  double wait_p99_s = 0;          // over all requests
  int64_t direction_changes = 0;  // up after down or down after up
  int64_t steps = 0;              // count changes
  // Bursts whose load needs more than every slot of the replicas held at their start: from the
  // start to the policy's first step up (bursty workload).
  double reaction_mean_s = 0;
  double reaction_max_s = 0;
};

// Replays `loads` for `hours` under `policy`, a tick every `tick_ms`, arrivals drawn from `seed`
// (the same for every policy).
Result<AutoscaleResult> ReplayAutoscale(const std::vector<ServiceLoad>& loads,
                                        const std::string& policy, int64_t hours, uint64_t seed,
                                        int64_t tick_ms = 100);

}  // namespace gpupool::twin
