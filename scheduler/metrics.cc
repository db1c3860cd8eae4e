#include "scheduler/metrics.h"

namespace gpupool {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

SchedulerMetrics::SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry,
                                   const std::string& version)
    : registry_(std::move(registry)) {
  BuildGauge()
      .Name("gpupool_build_info")
      .Help("Build information; the value is always 1")
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
  submissions_ = &BuildCounter()
                      .Name("gpupool_job_submissions_total")
                      .Help("Job submissions by outcome")
                      .Register(*registry_);
  transitions_ = &BuildCounter()
                      .Name("gpupool_task_transitions_total")
                      .Help("Task state transitions by new state")
                      .Register(*registry_);
  preemptions_ = &BuildCounter()
                      .Name("gpupool_preemptions_total")
                      .Help("Tasks preempted, by cause")
                      .Register(*registry_);
  starvation_reservations_ = &BuildGauge()
                                  .Name("gpupool_starvation_reservations")
                                  .Help("Starvation reservations standing, by pool")
                                  .Register(*registry_);
  starvation_nodes_ = &BuildGauge()
                           .Name("gpupool_starvation_reserved_nodes")
                           .Help("Nodes drained for starving tasks, by pool")
                           .Register(*registry_);
  starvation_events_ = &BuildCounter()
                            .Name("gpupool_starvation_reservation_events_total")
                            .Help("Starvation reservations made and dropped, by event")
                            .Register(*registry_);
  prometheus::Histogram::BucketBoundaries buckets{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  latency_ = &BuildHistogram()
                  .Name("gpupool_scheduling_latency_seconds")
                  .Help("Time from a task becoming pending to its allocation being committed")
                  .Register(*registry_)
                  .Add({}, buckets);
  pass_ = &BuildHistogram()
               .Name("gpupool_scheduling_pass_duration_seconds")
               .Help("Wall time of one scheduling pass")
               .Register(*registry_)
               .Add({}, buckets);
  tflops_ = &BuildGauge()
                 .Name("gpupool_pool_compute_tflops")
                 .Help(
                     "Pool compute in TFLOPS by kind: physical, offered (after overcommit), "
                     "allocated")
                 .Register(*registry_);
  vram_ = &BuildGauge()
               .Name("gpupool_pool_vram_bytes")
               .Help("Pool VRAM in bytes by kind: physical, offered, allocated")
               .Register(*registry_);
  queue_ = &BuildGauge()
                .Name("gpupool_queue_depth_tasks")
                .Help("Pending tasks by pool and priority class")
                .Register(*registry_);
  nodes_ = &BuildGauge().Name("gpupool_nodes").Help("Nodes by pool and state").Register(*registry_);
  quota_tflops_ = &BuildGauge()
                       .Name("gpupool_tenant_quota_tflops")
                       .Help(
                           "Tenant quota compute in TFLOPS by pool and kind: guaranteed, limit "
                           "(0 = unlimited), used, borrowed")
                       .Register(*registry_);
  quota_vram_ = &BuildGauge()
                     .Name("gpupool_tenant_quota_vram_bytes")
                     .Help("Tenant quota VRAM in bytes by pool and kind")
                     .Register(*registry_);
  quota_devices_ = &BuildGauge()
                        .Name("gpupool_tenant_quota_devices")
                        .Help("Tenant quota devices (whole GPUs, MIG instances) by pool and kind")
                        .Register(*registry_);
  auto usage = [this](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(*registry_);
  };
  usage_tflops_ = usage("gpupool_usage_tflops_seconds_total",
                        "Offered TFLOPS held × seconds, per tenant (cut to "
                        "metering.metrics_tenant_depth) and pool, as stored in the usage ledger");
  usage_physical_tflops_ = usage("gpupool_usage_physical_tflops_seconds_total",
                                 "The physical TFLOPS behind the offered ones × seconds");
  usage_vram_ = usage("gpupool_usage_vram_gib_seconds_total", "Offered VRAM held, GiB × seconds");
  usage_spill_ = usage("gpupool_usage_spill_gib_seconds_total",
                       "VRAM backed by host RAM under memory overcommit, GiB × seconds");
  usage_devices_ =
      usage("gpupool_usage_device_seconds_total", "Whole devices held exclusively × seconds");
  usage_mig_ = usage("gpupool_usage_mig_instance_seconds_total", "MIG instances held × seconds");
  usage_slots_ = usage("gpupool_usage_slot_seconds_total",
                       "Time-slice slots of GPUs or MIG instances held × seconds");
  usage_intervals_ = usage("gpupool_usage_intervals_total", "Usage ledger intervals stored");
}

void SchedulerMetrics::Usage(const std::string& tenant, const std::string& pool,
                             const UsageTotals& t) {
  const prometheus::Labels labels{{"tenant", tenant}, {"pool", pool}};
  usage_tflops_->Add(labels).Increment(t.TflopsSeconds());
  usage_physical_tflops_->Add(labels).Increment(t.PhysicalTflopsSeconds());
  usage_vram_->Add(labels).Increment(t.VramGibSeconds());
  usage_spill_->Add(labels).Increment(t.SpillGibSeconds());
  usage_devices_->Add(labels).Increment(static_cast<double>(t.device_seconds));
  usage_mig_->Add(labels).Increment(static_cast<double>(t.mig_instance_seconds));
  usage_slots_->Add(labels).Increment(static_cast<double>(t.slot_seconds));
  usage_intervals_->Add(labels).Increment(static_cast<double>(t.intervals));
}

void SchedulerMetrics::Submission(const std::string& outcome) {
  submissions_->Add({{"outcome", outcome}}).Increment();
}

void SchedulerMetrics::TaskTransition(const std::string& state) {
  transitions_->Add({{"state", state}}).Increment();
}

void SchedulerMetrics::SchedulingLatency(double seconds) { latency_->Observe(seconds); }
void SchedulerMetrics::PassDuration(double seconds) { pass_->Observe(seconds); }

void SchedulerMetrics::PoolCapacity(const std::string& pool, const Resources& physical,
                                    const Resources& offered, const Resources& allocated) {
  auto set = [&](const char* kind, const Resources& r) {
    tflops_->Add({{"pool", pool}, {"kind", kind}}).Set(static_cast<double>(r.milli_tflops) / 1000);
    vram_->Add({{"pool", pool}, {"kind", kind}})
        .Set(static_cast<double>(r.vram_mib) * 1024.0 * 1024.0);
  };
  set("physical", physical);
  set("offered", offered);
  set("allocated", allocated);
}

void SchedulerMetrics::QueueDepth(const std::string& pool, const std::string& priority_class,
                                  double depth) {
  queue_->Add({{"pool", pool}, {"priority_class", priority_class}}).Set(depth);
}

void SchedulerMetrics::Nodes(const std::string& pool, const std::string& state, double count) {
  nodes_->Add({{"pool", pool}, {"state", state}}).Set(count);
}

void SchedulerMetrics::Preemption(const std::string& cause) {
  preemptions_->Add({{"cause", cause}}).Increment();
}

void SchedulerMetrics::StarvationReservations(const std::string& pool, double reservations,
                                              double nodes) {
  starvation_reservations_->Add({{"pool", pool}}).Set(reservations);
  starvation_nodes_->Add({{"pool", pool}}).Set(nodes);
}

void SchedulerMetrics::StarvationEvent(const std::string& event) {
  starvation_events_->Add({{"event", event}}).Increment();
}

void SchedulerMetrics::TenantQuota(const std::string& tenant, const std::string& pool,
                                   const QuotaAmount& guaranteed, const QuotaAmount& limit,
                                   const QuotaAmount& used, const QuotaAmount& borrowed) {
  auto set = [&](const char* kind, const QuotaAmount& a) {
    std::map<std::string, std::string> labels{{"tenant", tenant}, {"pool", pool}, {"kind", kind}};
    quota_tflops_->Add(labels).Set(static_cast<double>(a.resources.milli_tflops) / 1000);
    quota_vram_->Add(labels).Set(static_cast<double>(a.resources.vram_mib) * 1024.0 * 1024.0);
    quota_devices_->Add(labels).Set(a.devices);
  };
  set("guaranteed", guaranteed);
  set("limit", limit);
  set("used", used);
  set("borrowed", borrowed);
}

}  // namespace gpupool
