// Recent workload: a twin replay of what a live pool actually ran — the input of `gpupoolctl
// whatif` (docs/twin.md, "Pre-flight"). Pure: it turns the store's pool history
// (scheduler/pool_history.h) and snapshots the daemon's Scheduler facade gave (the pool, its
// nodes, its quotas, the tenant tree) into the twin's Workload, OrgTree and TwinConfig. No I/O.
//
//  * Time: t = 0 is the window's start (`from_us`); the replay ends at `to_us` (now).
//  * Arrivals: each task arrives at its job's submission. Durations come from the task's last
//    attempt: end − start for an ended task; a task still RUNNING is censored at now (it runs
//    now − start, as far as we know); a task still waiting is censored likewise (now − submit:
//    it would have run at least until now). At least 1 s each. A task that ended without ever
//    starting (cancelled while pending) is left out (`never_ran`).
//  * GPUs: every GPU of the pool's nodes becomes one unit of the pool's largest GPU (physical
//    TFLOPS and VRAM), its model kept; the twin counts allocation in those units. A GPU in MIG
//    mode keeps its current layout (its instances with their profiles and starts) and whether it
//    may be re-laid out; one whose model or profiles the catalog lacks is left out
//    (`unmodelled_gpus`). A fractional request becomes the share of that unit it needs (the
//    larger of its TFLOPS and VRAM shares, rounded up, at most a whole GPU); whole GPUs stay
//    whole GPUs (with their model list); a MIG request keeps its profile (its compute share of
//    the unit counts in the report's demand and allocation); a SKU is resolved through the
//    daemon's SKU table. A MIG profile none of the pool's MIG GPUs has, or an unknown SKU, is
//    left out (`unmodelled`).
//  * Gangs: each task of a gang replays as its own task (the twin submits one-task jobs).
//  * Tenants and quotas: every tenant the tasks name and every quota'd tenant of the pool, with
//    their ancestors; a quota becomes the twin's share of the pool — its compute (milli-TFLOPS),
//    or its devices or VRAM in units of the pool's GPU if those weigh more.
//  * Config: the pool's strategy, compute overcommit and MIG re-layout policy, the daemon's
//    priority classes, queue order and GPU catalog, preemption as the classes have it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/options.h"
#include "scheduler/pool_history.h"
#include "scheduler/views.h"
#include "twin/org_tree.h"
#include "twin/twin.h"
#include "twin/workload.h"

namespace gpupool::twin {

// What the live daemon showed (snapshots through the Scheduler facade) and the window.
struct LivePool {
  PoolRecord pool;
  std::vector<NodeView> nodes;
  std::vector<QuotaRecord> quotas;   // the pool's quotas
  std::vector<std::string> tenants;  // every tenant path
  SchedulerOptions scheduler = SchedulerOptions::Defaults();
  int64_t from_us = 0, to_us = 0;
};

struct ExtractionStats {
  int64_t tasks = 0;             // replayed
  int64_t running_censored = 0;  // still running at now
  int64_t pending_censored = 0;  // still waiting at now
  int64_t never_ran = 0;         // ended without starting: left out
  int64_t unmodelled = 0;        // requests the replay cannot shape: left out
  int64_t unmodelled_gpus = 0;   // MIG GPUs of a model or profile the catalog lacks: left out
  bool truncated = false;        // the history hit its row cap
};

struct RecentWorkload {
  Workload workload;
  OrgTree org;
  TwinConfig baseline;
  ExtractionStats stats;
};

// FAILED_PRECONDITION when the pool has no GPU (nothing to replay on).
Result<RecentWorkload> ExtractRecentWorkload(const PoolHistory& history, const LivePool& live);

// The share of the pool (thousandths of a percent, at most 100 %) that `amount` is, for a pool
// of `gpus` GPUs of `unit` each.
int64_t QuotaPctMilli(const QuotaAmount& amount, const Resources& unit, int64_t gpus);

// A candidate change to the live config; absent fields stay as they are.
struct QuotaChange {
  std::optional<QuotaAmount> guaranteed, limit;
};
struct ConfigChange {
  std::optional<std::string> strategy;
  std::optional<int64_t> compute_overcommit_permille;
  std::optional<bool> preemption;
  std::optional<MigRelayout> mig_relayout;
  std::map<std::string, QuotaChange> quotas;  // by tenant path
};

// The candidate: `base` with `change` applied (config and org tree). INVALID_ARGUMENT naming
// the field for an unknown strategy, an overcommit below 1, a quota of an unknown tenant.
Result<RecentWorkload> ApplyChange(const RecentWorkload& base, const LivePool& live,
                                   const ConfigChange& change);

}  // namespace gpupool::twin
