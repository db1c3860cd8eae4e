#include "scheduler/options.h"

namespace gpupool {

SchedulerOptions SchedulerOptions::Defaults() {
  SchedulerOptions o;
  auto add_class = [&](std::string name, int32_t value, bool preemptible, bool may_preempt,
                       int64_t min_runtime_ms) {
    o.priority_classes[name] = PriorityClass{name, value, preemptible, may_preempt, min_runtime_ms};
  };
  add_class("low", 0, true, false, 0);
  add_class("normal", 100, true, false, 60'000);
  add_class("high", 1000, true, true, 60'000);
  add_class("system", 10000, false, true, 0);
  o.default_priority_class = "normal";

  auto add_sku = [&](std::string name, int64_t milli_tflops, int64_t vram_mib, int64_t cpu_milli,
                     int64_t memory_mib) {
    ResourceRequest r;
    r.shape = RequestShape::kFractional;
    r.fractional = Resources{milli_tflops, vram_mib};
    r.cpu_milli = cpu_milli;
    r.memory_mib = memory_mib;
    o.skus[name] = Sku{name, r};
  };
  add_sku("small", 50'000, 10'240, 2'000, 8'192);     // 50 TFLOPS, 10 GiB
  add_sku("medium", 200'000, 40'960, 8'000, 32'768);  // 200 TFLOPS, 40 GiB
  ResourceRequest large;
  large.shape = RequestShape::kWholeGpus;
  large.gpu_count = 1;
  large.cpu_milli = 16'000;
  large.memory_mib = 131'072;
  o.skus["large"] = Sku{"large", large};  // one whole GPU
  return o;
}

Result<QuotaAmount> QuotaInSkuUnits(const SchedulerOptions& options, const std::string& sku,
                                    int32_t count) {
  auto it = options.skus.find(sku);
  if (it == options.skus.end()) return Status::NotFound("sku '" + sku + "' not found");
  if (count < 0) return Status::InvalidArgument("sku count must not be negative");
  const ResourceRequest& r = it->second.request;
  QuotaAmount a;
  if (r.shape == RequestShape::kWholeGpus) {
    a.devices = r.gpu_count * count;
  } else {
    a.resources.milli_tflops = r.fractional.milli_tflops * count;
    a.resources.vram_mib = r.fractional.vram_mib * count;
  }
  return a;
}

Status ValidateMeteringOptions(const MeteringOptions& m) {
  if (m.interval_s < 1 || m.interval_s > 3600 || 3600 % m.interval_s != 0) {
    return Status::InvalidArgument("metering.interval_s: " + std::to_string(m.interval_s) +
                                   " must divide an hour (1..3600: 10, 30, 60, 300, …)");
  }
  if (m.metrics_tenant_depth < 1) {
    return Status::InvalidArgument("metering.metrics_tenant_depth: must be at least 1");
  }
  if (m.rollup_after_days < 0) {
    return Status::InvalidArgument("metering.rollup_after_days: must not be negative");
  }
  if (m.max_intervals_per_batch < 1) {
    return Status::InvalidArgument("metering.max_intervals_per_batch: must be at least 1");
  }
  if (m.report_concurrency < 1) {
    return Status::InvalidArgument("metering.report_concurrency: must be at least 1");
  }
  if (m.report_timeout_ms < 1) {
    return Status::InvalidArgument("metering.report_timeout_ms: must be at least 1");
  }
  return Status::Ok();
}

}  // namespace gpupool
