// SchedulerMetrics: the scheduler's Prometheus series, registered once on a registry the daemon
// serves at /metrics. The core calls the typed hooks; it never builds label sets in hot paths
// except through these few methods.
//
// Names follow Prometheus conventions: gpupool_ prefix, base units in the name.
// Thread safety: prometheus-cpp metrics are thread-safe; the hooks may be called from any thread.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "pool/resources.h"
#include "scheduler/model.h"
#include "scheduler/usage_report.h"

namespace gpupool {

class SchedulerMetrics {
 public:
  explicit SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry,
                            const std::string& version);

  // outcome: "accepted", "invalid", "not_found", "denied", "unavailable", "error".
  void Submission(const std::string& outcome);
  void TaskTransition(const std::string& state);
  void SchedulingLatency(double seconds);  // submit (or requeue) → allocation committed
  void PassDuration(double seconds);
  void PoolCapacity(const std::string& pool, const Resources& physical, const Resources& offered,
                    const Resources& allocated);
  void QueueDepth(const std::string& pool, const std::string& priority_class, double depth);
  void Nodes(const std::string& pool, const std::string& state, double count);
  // cause: "priority" or "reclaim".
  void Preemption(const std::string& cause);
  // Starvation reservations (docs/tenancy.md): per pool, how many stand and how many nodes they
  // hold (gpupool_starvation_reservations, gpupool_starvation_reserved_nodes); and each one
  // made or dropped, by event: made, started, cancelled, timed_out, node_lost
  // (gpupool_starvation_reservation_events_total).
  void StarvationReservations(const std::string& pool, double reservations, double nodes);
  void StarvationEvent(const std::string& event);
  // Per tenant and pool: the quota's guaranteed and limit, and what the tenant's subtree uses
  // and borrows (used beyond guaranteed), as gpupool_tenant_quota_{tflops,vram_bytes,devices}.
  void TenantQuota(const std::string& tenant, const std::string& pool,
                   const QuotaAmount& guaranteed, const QuotaAmount& limit, const QuotaAmount& used,
                   const QuotaAmount& borrowed);
  // Usage the ledger stored (each interval once), per tenant (cut to the configured depth by the
  // caller, so the label set stays bounded) and pool: gpupool_usage_tflops_seconds_total,
  // _physical_tflops_seconds_total, _vram_gib_seconds_total, _spill_gib_seconds_total,
  // _device_seconds_total, _mig_instance_seconds_total, _slot_seconds_total, and
  // gpupool_usage_intervals_total.
  void Usage(const std::string& tenant, const std::string& pool, const UsageTotals& t);
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* submissions_;
  prometheus::Family<prometheus::Counter>* transitions_;
  prometheus::Family<prometheus::Counter>* preemptions_;
  prometheus::Family<prometheus::Gauge>* starvation_reservations_;
  prometheus::Family<prometheus::Gauge>* starvation_nodes_;
  prometheus::Family<prometheus::Counter>* starvation_events_;
  prometheus::Histogram* latency_;
  prometheus::Histogram* pass_;
  prometheus::Family<prometheus::Gauge>* tflops_;
  prometheus::Family<prometheus::Gauge>* vram_;
  prometheus::Family<prometheus::Gauge>* queue_;
  prometheus::Family<prometheus::Gauge>* nodes_;
  prometheus::Family<prometheus::Gauge>* quota_tflops_;
  prometheus::Family<prometheus::Gauge>* quota_vram_;
  prometheus::Family<prometheus::Gauge>* quota_devices_;
  prometheus::Family<prometheus::Counter>* usage_tflops_;
  prometheus::Family<prometheus::Counter>* usage_physical_tflops_;
  prometheus::Family<prometheus::Counter>* usage_vram_;
  prometheus::Family<prometheus::Counter>* usage_spill_;
  prometheus::Family<prometheus::Counter>* usage_devices_;
  prometheus::Family<prometheus::Counter>* usage_mig_;
  prometheus::Family<prometheus::Counter>* usage_slots_;
  prometheus::Family<prometheus::Counter>* usage_intervals_;
};

}  // namespace gpupool
