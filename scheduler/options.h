// SchedulerOptions: the typed, validated policy the core runs with — priority classes, SKUs,
// timeouts. Parsed once at the edge (cmd/gpupoold config); a SIGHUP reload may replace the
// classes and SKUs (Core::SetPolicy), nothing else.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "pool/catalog.h"
#include "pool/resources.h"
#include "scheduler/model.h"
#include "scheduler/queue_order.h"

namespace gpupool {

struct PriorityClass {
  std::string name;
  int32_t value = 0;           // higher runs first and may preempt lower
  bool preemptible = true;     // tasks of this class may be preempted
  bool may_preempt = false;    // tasks of this class may preempt others
  int64_t min_runtime_ms = 0;  // a task of this class runs at least this long before preemption
};

// A named request shape: a fractional slice or whole GPUs, plus host CPU and memory.
struct Sku {
  std::string name;
  ResourceRequest request;  // shape kFractional or kWholeGpus (never kSku)
};

// Fair share and preemption policy (see docs/tenancy.md).
struct TenancyOptions {
  // Half-life of the usage memory behind fair share: a tenant's decayed usage moves half-way to
  // its current usage in this time. 0: fair share looks at current usage only.
  int64_t fair_share_half_life_ms = 15 * 60 * 1000;
  // Disruption budget: a tenant loses at most this many tasks to preemption per window, after
  // which its tasks are not chosen as victims until the window slides. 0: unlimited.
  int32_t disruption_budget_victims = 0;
  int64_t disruption_budget_window_ms = 10 * 60 * 1000;
  // A reservation made by preemption is dropped when its victims have not all stopped after this
  // long (their agents hang or the node is lost); the preemptor then queues like any task.
  // 0: three grace periods plus the heartbeat timeout.
  int64_t reservation_timeout_ms = 0;
  // Back-off after preemption (core_backoff.cc): a task preempted for the k-th time is placed
  // again no sooner than preemption_backoff_ms × 2^(k−1) after its requeue, at most
  // preemption_backoff_max_ms — so a task of a class with no minimum runtime is not restarted
  // into room it loses again at once, over and over. Gangs restart whole at once. 0: off.
  int64_t preemption_backoff_ms = 10'000;
  int64_t preemption_backoff_max_ms = 10 * 60 * 1000;
  // How a pass orders the pending tasks of one priority level (scheduler/queue_order.h):
  // fair share between tenants (the default) or plain age across tenants (FIFO).
  QueueOrderKind queue_order = QueueOrderKind::kFairShare;
  // Starvation reservations (core_starvation.cc, docs/tenancy.md): a pending task — or a whole
  // gang — that has found no room for this long gets nodes reserved for it, where nothing new of
  // its class or lower is placed (higher classes only when nothing else fits), so they drain.
  // 0: off — the default: on the cluster twin's workloads the drain (run times are unknown, so
  // nothing is backfilled onto a draining node) cost more work than it started
  // (benchmarks-archive.md, "Starvation reservations in the twin"); 600000 (10 min) is the
  // setting measured there.
  int64_t starvation_reserve_after_ms = 0;
  // At most this many starvation reservations per pool at once (a gang's counts once), oldest
  // waiting first, so a pool is never drained wholesale. >= 1.
  int32_t starvation_max_reservations = 2;
  // A starvation reservation whose task has not started after this long is dropped; the task
  // reserves again only after another starvation_reserve_after_ms (others get a turn). > 0.
  int64_t starvation_reservation_timeout_ms = 6LL * 3600 * 1000;
};

// The usage ledger (scheduler/metering.h, docs/billing.md "Ledger").
struct MeteringOptions {
  // false: nothing is metered (no ledger rows, no usage counters). For measuring metering's
  // cost and for operators who bill from elsewhere; the ledger has gaps for the time it is off.
  bool enabled = true;
  // Running attempts are metered in closed intervals cut at multiples of this (UTC), plus the
  // last partial one when the attempt ends: a crash loses at most one open interval's writes,
  // which the next leader writes from the stored mark. Must divide an hour (1..3600).
  int64_t interval_s = 60;
  // /metrics usage counters label tenants cut to this depth ("acme/research/alice" at 2 is
  // "acme/research"), so the series stay few whatever the tree's size. >= 1.
  int32_t metrics_tenant_depth = 2;
  // Ledger intervals older than this many whole days are rolled up into daily rows (totals
  // unchanged). 0: never.
  int32_t rollup_after_days = 0;
  // At most this many intervals per ledger batch (a boundary closes every running attempt).
  int32_t max_intervals_per_batch = 2000;
  // Usage reports (GetUsage, and invoices and the usage feed rated from them): at most this many
  // run at once on connections of their own (one more is RESOURCE_EXHAUSTED), each cancelled
  // after report_timeout_ms (DEADLINE_EXCEEDED). Read by gpupoold for its store, not the core.
  int32_t report_concurrency = 2;
  int64_t report_timeout_ms = 60'000;
};
// INVALID_ARGUMENT naming the field when a value is out of range.
Status ValidateMeteringOptions(const MeteringOptions& m);

struct SchedulerOptions {
  std::map<std::string, PriorityClass> priority_classes;
  std::string default_priority_class = "normal";
  std::map<std::string, Sku> skus;
  std::string default_strategy = "fgd-pack";
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 10000;
  int64_t stop_grace_period_ms = 10000;
  // The node lease (scheduler/node_lease.h, docs/ha.md): a node silent for heartbeat_timeout_ms
  // is NOT_READY (nothing new is placed there) but keeps its tasks. An agent that hears no
  // renewal for node_lease_ms (the lease L; 0: heartbeat_timeout_ms, the core's old coupling;
  // gpupoold's default is 5 minutes) stops its tasks (SIGTERM) and kills what is left
  // node_lease_stop_grace_ms later; the scheduler requeues a silent node's tasks only after
  // L plus both (node_lease_margin_ms: clock rate and kill latency), so no task runs twice, and
  // a control-plane outage shorter than L kills nothing.
  int64_t node_lease_ms = 0;
  int64_t node_lease_stop_grace_ms = 2000;
  int64_t node_lease_margin_ms = 1000;
  int32_t max_tasks_per_job = 10000;
  // Upper bound on how many pending tasks one scheduling pass considers.
  int32_t max_tasks_per_pass = 20000;
  // A job whose tasks have all ended is kept in memory (GetJob, ListJobs, WatchJob) this long
  // after it finished, then forgotten by the daemon; its rows stay in PostgreSQL. 0: forever.
  int64_t job_retention_ms = 24LL * 3600 * 1000;
  // The tick skips its periodic full pass while the last one was expensive (over 2 ms of the
  // host's time) until fifty times its cost has gone by (docs/architecture.md). The cluster twin
  // (twin/) turns this off: its time is simulated, so its passes must not depend on how fast or
  // how loaded the host is; it paces periodic passes with its own tick interval instead.
  bool throttle_periodic_passes = true;
  TenancyOptions tenancy;
  MeteringOptions metering;
  // GPU models' MIG geometry, for dynamic MIG (docs/placement.md); null: the built-in catalog.
  const Catalog* catalog = nullptr;
  // A GPU the scheduler re-laid out is not re-laid out again for this long (no flapping).
  int64_t mig_relayout_cooldown_ms = 30'000;

  // The built-in defaults: classes low(0), normal(100), high(1000, may preempt), system(10000,
  // not preemptible, may preempt); SKUs small/medium/large.
  static SchedulerOptions Defaults();
};

// A quota amount given in SKU units ("8 × medium"), converted at the edge: a fractional SKU
// counts its TFLOPS and VRAM `count` times, a whole-GPU SKU `gpu_count × count` devices.
// NOT_FOUND for an unknown SKU; INVALID_ARGUMENT for a negative count.
Result<QuotaAmount> QuotaInSkuUnits(const SchedulerOptions& options, const std::string& sku,
                                    int32_t count);

}  // namespace gpupool
