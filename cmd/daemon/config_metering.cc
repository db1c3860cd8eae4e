// The daemon config's `metering:` section (docs/billing.md, "Ledger"):
//
//   metering:
//     enabled: true              # false: meter nothing (to measure the cost)
//     interval_s: 60             # ledger intervals are cut at multiples of this; divides 3600
//     metrics_tenant_depth: 2    # /metrics usage counters label tenants cut to this depth
//     rollup_after_days: 90      # intervals older than this roll up into daily rows; 0 = never
//     max_intervals_per_batch: 2000
//     report_concurrency: 2      # usage reports at once (one more: RESOURCE_EXHAUSTED)
//     report_timeout_ms: 60000   # a report running longer is cancelled (DEADLINE_EXCEEDED)
#include "cmd/daemon/config_metering.h"

namespace gpupool {

Status ParseMetering(const YamlDoc& doc, const YAML::Node& root, MeteringOptions* m) {
  YAML::Node n = root["metering"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("metering");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(n, p,
                    {"enabled", "interval_s", "metrics_tenant_depth", "rollup_after_days",
                     "max_intervals_per_batch", "report_concurrency", "report_timeout_ms"}));
  if (YAML::Node e = n["enabled"]) {
    if (!e.IsScalar() || (e.Scalar() != "true" && e.Scalar() != "false")) {
      return doc.Error(e, p.Key("enabled"), "must be true or false");
    }
    m->enabled = e.Scalar() == "true";
  }
  if (n["interval_s"]) {
    GPUPOOL_ASSIGN_OR_RETURN(m->interval_s, doc.Int(n, p, "interval_s", 1, 3600));
    if (3600 % m->interval_s != 0) {
      return doc.Error(
          n["interval_s"], p.Key("interval_s"),
          "must divide an hour (10, 15, 30, 60, 300, …), got " + std::to_string(m->interval_s));
    }
  }
  if (n["metrics_tenant_depth"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t d, doc.Int(n, p, "metrics_tenant_depth", 1, 16));
    m->metrics_tenant_depth = static_cast<int32_t>(d);
  }
  if (n["rollup_after_days"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t d, doc.Int(n, p, "rollup_after_days", 0, 36'500));
    m->rollup_after_days = static_cast<int32_t>(d);
  }
  if (n["max_intervals_per_batch"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t b, doc.Int(n, p, "max_intervals_per_batch", 1, 100'000));
    m->max_intervals_per_batch = static_cast<int32_t>(b);
  }
  if (n["report_concurrency"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t c, doc.Int(n, p, "report_concurrency", 1, 64));
    m->report_concurrency = static_cast<int32_t>(c);
  }
  if (n["report_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(m->report_timeout_ms,
                             doc.Int(n, p, "report_timeout_ms", 100, 3'600'000));
  }
  return ValidateMeteringOptions(*m);
}

}  // namespace gpupool
