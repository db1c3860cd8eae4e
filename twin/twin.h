// Twin: a discrete-event replay of a Workload through the production scheduler core.
//
// The real scheduler::Core runs with a ManualClock, the in-memory store (store/memory_store.h,
// held to the PostgreSQL store's conformance suite) and an executor the twin drains itself.
// Simulated agents (sim_agents.h) answer the core's commands: a StartTask is reported RUNNING
// `start_latency_ms` later and SUCCEEDED when the task's duration has run; a StopTask is
// answered with the exit (SIGTERM, 143) `stop_latency_ms` later. Nothing sleeps: the loop pops
// the earliest event, sets the clock to its time, hands it to the core and drains the core's
// queue, so a month of cluster time takes minutes.
//
// Events at one time run in the order they were scheduled (a sequence number breaks ties), so
// a replay is deterministic: the same workload and config give the same placements, waits and
// report on every run and every host (the core's host-time pass throttle is off, see
// SchedulerOptions::throttle_periodic_passes).
//
// Preemption: a preempted task is requeued by the core and, when started again, runs its FULL
// duration again (no checkpoint: the work of the preempted attempt is lost and counted in
// lost_gpu_s) unless `resume_remaining`, where it runs only what was left.
//
// The core's tick runs every `tick_ms` of simulated time while tasks are pending; with nothing
// pending the loop jumps straight to the next event. The daemon ticks every 200 ms but skips the
// tick's full pass, while a pass costs over 2 ms, until 50 times its cost has gone by — every
// few seconds under a deep backlog; the twin's 2 s default is of that order, and fixed, so a
// replay does not depend on the host. Submissions and releases ask for passes at once either way.
// Nodes never fail and never miss heartbeats (the heartbeat timeout is set beyond any replay).
//
// Thread safety: none; one Twin runs on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "scheduler/options.h"
#include "twin/org_tree.h"
#include "twin/report.h"
#include "twin/workload.h"

namespace gpupool::twin {

struct TwinConfig {
  std::string label = "baseline";
  std::string pool = "twin";
  std::string strategy = "fgd-pack";  // the pool's placement strategy
  bool preemption = true;             // false: no class may preempt or be preempted
  QueueOrderKind queue_order = QueueOrderKind::kFairShare;
  int64_t compute_overcommit_permille = 1000;
  // Whether the core re-lays out the pool's MIG GPUs (TwinNode::mig) to follow demand, as
  // gpupoold's planner does; a layout the core asks for is in service `relayout_ms` later.
  MigRelayout mig_relayout = MigRelayout::kOff;
  int64_t relayout_ms = 8000;
  int64_t tick_ms = 2000;
  int64_t sample_ms = 10'000;  // time series and guarantee checks
  int64_t start_latency_ms = 0;
  int64_t stop_latency_ms = 0;
  bool resume_remaining = false;
  int64_t horizon_us = 0;                   // replay end; 0: the last arrival
  int64_t warmup_us = 0;                    // averages start here
  int64_t guarantee_grace_us = 60'000'000;  // "within 60 s"
  int series_points = 400;                  // time series points kept in the report
  bool record_starts = false;               // TwinReport::starts (consistency tests)
  bool progress = false;                    // a line on stderr every simulated hour
  // Checked every 1024 events: true ends the replay there (a caller's deadline; the report
  // then covers only what ran). Empty: never.
  std::function<bool()> should_stop;
  // Priority classes etc.; Defaults() unless set. The twin overrides timeouts it does not model.
  SchedulerOptions scheduler = SchedulerOptions::Defaults();
};

// Runs the whole replay. INVALID_ARGUMENT for a bad config (unknown strategy, a class the org
// tree names that the options lack); INTERNAL if the core refuses the setup.
Result<TwinReport> RunTwin(const Workload& workload, const OrgTree& org, const TwinConfig& config);

}  // namespace gpupool::twin
