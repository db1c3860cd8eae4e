// MIG replay: a day of MIG requests on a fleet of MIG GPUs, on a simulated clock, to compare
// static layouts with dynamic ones chosen by the layout planner (pool/mig_layout.h), issue 27.
//
// The workload (MigShiftingDay): requests name one MIG profile and run for a drawn duration. The
// mix shifts during the day — night (00–07 h) mostly 7g training, morning (07–12 h) mostly 1g
// inference, afternoon (12–18 h) 3g/4g fine-tuning, evening (18–24 h) a spread — at an offered
// load of `load` × the fleet's compute slices (in compute-slice-seconds). Arrivals are Poisson
// within each hour; durations exponential around a mean per profile size (1g 10 min, 1g with
// two memory slices 20 min, 2g 30 min, 3g 60 min, 4g 90 min, 7g 180 min), at least 60 s.
//
// The fleet: every GPU has a layout. A request takes a free instance of its profile (the GPU
// with the most running instances first, so that others empty out), else waits in its
// profile's FIFO queue; a freed instance goes to the oldest request waiting for its profile.
// Policies:
//  - static: each GPU keeps the layout it starts with for the whole day (a uniform layout, or a
//    mixed fleet planned with hindsight from the day's mean demand: PlanMigFleet).
//  - dynamic: every `replan_every_s`, and whenever a GPU becomes idle, each GPU with no running
//    instance may be re-laid out: the planner is given the fleet's estimated demand (instances
//    running + waiting per profile, exponentially smoothed over `mix_tau_s`: no hindsight)
//    minus what the other GPUs' layouts supply, and its layout replaces the GPU's when it serves
//    at least one more compute slice of that residual. A re-layout takes `relayout_s`, during
//    which the GPU serves nothing. A GPU with a running instance is never re-laid out.
//  - scheduler: the same events, but the choice is gpupoold's own planner's
//    (scheduler/mig_planner.h): idle GPUs are re-laid out only for the requests waiting now,
//    the smoothed demand serving as the pool's learned mix for the spare slices.
// Not modelled: partial re-layout around running instances, draining a GPU for a better layout,
// NVML failures, compute instances smaller than their GPU instance, MIG time-slicing.
//
// Pure: no I/O, no threads; the same seed gives the same report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "pool/catalog.h"
#include "pool/mig_layout.h"

namespace gpupool::twin {

struct MigReplayOptions {
  int32_t gpus = 32;
  int64_t hours = 24;
  uint64_t seed = 1;
  double load = 0.7;             // offered compute-slice load, share of the fleet's
  double relayout_s = 8;         // a GPU out of service while its instances are rebuilt
  int64_t replan_every_s = 300;  // dynamic: periodic look at idle GPUs
  double mix_tau_s = 1800;       // dynamic: smoothing time constant of the demand estimate
  double min_gain_slices = 1;    // dynamic: a re-layout must serve this much more
};

struct MigRequest {
  int64_t arrival_ms = 0;
  int32_t profile = 0;  // index into model.mig_profiles
  int64_t duration_ms = 0;
};

// The shifting day for `model` (its 1g, 1g with two memory slices, 2g, 3g, 4g and 7g profiles,
// found by compute and memory slices); sorted by arrival. FAILED_PRECONDITION when the model
// lacks one of them or its placement rules; INVALID_ARGUMENT on bad options.
Result<std::vector<MigRequest>> MigShiftingDay(const GpuModel& model,
                                               const MigReplayOptions& options);

struct MigFleetPolicy {
  std::string name;
  std::vector<MigLayout> layouts;  // each GPU's layout at the start (one per GPU)
  bool dynamic = false;
  // Dynamic, but choosing as gpupoold does (scheduler/mig_planner.h, a pool with `mig_relayout:
  // idle`): for the requests waiting now, with the smoothed demand as the learned mix, at most
  // once per `scheduler_cooldown_s` per GPU.
  bool scheduler_planner = false;
  double scheduler_cooldown_s = 30;
};

// Every GPU laid out the same.
MigFleetPolicy UniformStaticFleet(const MigLayout& layout, int32_t gpus);
// A fleet laid out GPU by GPU for `want` (instances per profile across the fleet, scaled down to
// the fleet's compute when it asks for more): each GPU gets PlanMigLayout of what the GPUs before
// it do not yet supply.
Result<std::vector<MigLayout>> PlanMigFleet(const GpuModel& model, const MigWant& want,
                                            int32_t gpus);
// The dynamic policy, starting from a fleet planned for an even mix (every profile the same share
// of compute): what it knows before the first request.
Result<MigFleetPolicy> DynamicMigFleet(const GpuModel& model, int32_t gpus);
// The same start, re-laid out by gpupoold's planner (MigFleetPolicy::scheduler_planner).
Result<MigFleetPolicy> SchedulerMigFleet(const GpuModel& model, int32_t gpus);
// The day's mean concurrent instances per profile (Σ duration / day): the hindsight a static
// planner would need.
MigWant MeanDemand(const GpuModel& model, const std::vector<MigRequest>& requests, int64_t hours);

struct MigReplayResult {
  std::string policy;
  int64_t requests = 0;
  int64_t started = 0;
  // Work requested: each request's duration cut at the day's end (instance-seconds, and
  // weighted by compute slices); placed: the part that ran within the day.
  double requested_instance_s = 0;
  double placed_instance_s = 0;
  double requested_slice_s = 0;
  double placed_slice_s = 0;
  double wait_p50_s = 0;  // over all requests; one never started counts its wait to the end
  double wait_p99_s = 0;
  int64_t relayouts = 0;
  double placed_share() const {
    return requested_instance_s > 0 ? placed_instance_s / requested_instance_s : 1;
  }
  double placed_slice_share() const {
    return requested_slice_s > 0 ? placed_slice_s / requested_slice_s : 1;
  }
};

Result<MigReplayResult> ReplayMig(const GpuModel& model, const std::vector<MigRequest>& requests,
                                  const MigFleetPolicy& policy, const MigReplayOptions& options);

}  // namespace gpupool::twin
