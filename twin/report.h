// TwinReport: what a twin replay measured, and its JSON and SVG forms (report_json.cc,
// report_svg.cc). Every figure is computed by the twin from what the simulated agents were told
// (starts with their grants, stops, exits), not read back from the core, so the checks
// (quota_violations, guarantee misses, preemption rules) are independent of the code they check.
//
// Units: times in seconds of simulated time; allocation in percent of the pool's GPUs;
// lost work in GPU-seconds (a share of g milli-GPU counts g/1000 GPU).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpupool::twin {

struct WaitStats {
  int64_t count = 0;          // tasks that arrived (started or not)
  int64_t never_started = 0;  // still waiting at the horizon (their wait counts to the horizon)
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};

// One point of the time series.
struct SeriesPoint {
  double t_s = 0;
  double alloc_pct = 0;     // of physical GPUs, at that instant
  double frag_pct = 0;      // idle GPU the workload's shapes cannot use (see docs/twin.md)
  double demand_pct = 0;    // arrived and unfinished work, running or waiting
  int64_t queue_depth = 0;  // pending tasks in the core
};

struct TenantReport {
  std::string tenant;  // a quota'd group (its subtree)
  double guaranteed_gpus = 0, limit_gpus = 0;
  WaitStats wait;
  double time_avg_gpus = 0;
  // Samples where the group had a task waiting longer than the grace period that would have
  // kept it within its guarantee, and the simulated seconds they cover.
  int64_t below_guarantee_samples = 0;
  double below_guarantee_s = 0;
  int64_t samples_with_waiting = 0;
  std::vector<std::pair<double, double>> share;  // (t_s, used GPUs), thinned like the series
};

// One start the simulated agents were told about (TwinConfig::record_starts), in order.
struct StartLog {
  double t_s = 0;
  std::string task;  // the pod's name
  int32_t attempt = 0;
  std::string node;
  std::vector<std::string> devices;
};

struct TwinReport {
  std::string label, workload, strategy, queue_order;
  bool preemption = true;
  bool resume_remaining = false;
  int64_t nodes = 0, gpus = 0, tasks = 0, skipped_cpu_only = 0, rejected = 0;
  double horizon_s = 0, warmup_s = 0;

  double time_avg_gpu_allocation_pct = 0;          // physical
  double time_avg_gpu_allocation_offered_pct = 0;  // of the offered (overcommitted) capacity
  double time_avg_demand_pct = 0;                  // > 100: demand exceeded capacity
  double time_avg_frag_pct = 0;
  double time_avg_queue_depth = 0;

  std::map<std::string, WaitStats> wait_by_class;
  std::map<std::string, WaitStats> wait_by_tenant;         // leaf tenants
  std::map<std::string, WaitStats> requeue_wait_by_class;  // preempted → started again

  int64_t preemptions = 0;
  double lost_gpu_s = 0;
  int64_t tasks_preempted_twice_or_more = 0;
  int64_t max_preemptions_of_a_task = 0;
  int64_t preempted_before_min_runtime = 0;    // an attempt stopped before its class's minimum
  int64_t repreempted_within_min_runtime = 0;  // two preemptions of one task closer than it
  int64_t quota_violations = 0;                // starts that took a group past its limit
  int64_t overallocated_devices = 0;           // grants beyond a device's offered capacity
  std::string mig_relayout = "off";            // the pool's policy (MigRelayout)
  int64_t mig_relayouts = 0;                   // layouts the core asked for and the twin applied
  std::vector<TenantReport> tenants;

  std::vector<SeriesPoint> series;
  std::vector<StartLog> starts;  // only with record_starts; not in the JSON
  int64_t events = 0;
  double wall_s = 0, cpu_s = 0;
  double speedup = 0;  // simulated seconds per second of the process's CPU time
};

// The report as JSON (one object), stable key order.
std::string ToJson(const TwinReport& r);
// Two reports side by side: {"baseline": …, "candidate": …, "delta": {…}}.
std::string WhatIfJson(const TwinReport& a, const TwinReport& b);
// An SVG of allocation, demand and fragmentation (%, left axis) and queue depth (right axis)
// over simulated time; with `b`, both replays (the second dashed).
std::string ToSvg(const TwinReport& a, const TwinReport* b = nullptr);

}  // namespace gpupool::twin
