// ServiceImpl::GetUsage: the usage ledger's report (docs/billing.md, "Ledger"). Validates the
// filters, confines a non-admin to its own subtree (any role may read its subtree's usage: it is
// what the tenant is billed for), and reads through ServiceOptions::usage (the store's
// QueryUsage, on the caller's thread: one bounded aggregate query).
#include <google/protobuf/util/time_util.h>

#include "api/convert.h"
#include "api/service_impl.h"
#include "api/service_internal.h"
#include "api/validate.h"
#include "scheduler/model.h"

namespace gpupool::api {
namespace {

Result<int64_t> ParseTime(const std::string& text, std::string_view field) {
  if (text.empty()) return int64_t{0};
  google::protobuf::Timestamp ts;
  if (!google::protobuf::util::TimeUtil::FromString(text, &ts)) {
    return Invalid(field, "'" + text + "' is not an RFC 3339 time such as 2026-11-01T00:00:00Z");
  }
  const int64_t us = google::protobuf::util::TimeUtil::TimestampToMicroseconds(ts);
  if (us < 0) return Invalid(field, "must not be before 1970-01-01T00:00:00Z");
  return us;
}

Result<UsageQuery> UsageQueryFromProto(const v1::GetUsageRequest& req) {
  UsageQuery q;
  q.tenant = req.tenant();
  q.pool = req.pool();
  q.model = req.model();
  q.priority_class = req.priority_class();
  if (!req.period().empty()) {
    std::optional<UsagePeriod> p = ParseUsagePeriod(req.period());
    if (!p) return Invalid("period", "'" + req.period() + "' is not one of hour, day, month");
    q.period = *p;
  }
  GPUPOOL_ASSIGN_OR_RETURN(q.from_us, ParseTime(req.from(), "from"));
  GPUPOOL_ASSIGN_OR_RETURN(q.to_us, ParseTime(req.to(), "to"));
  if (q.to_us != 0 && q.to_us <= q.from_us) return Invalid("to", "must be after from");
  if (req.tenant_depth() < 0 || req.tenant_depth() > 64) {
    return Invalid("tenant_depth", "must be 0..64 (0 = full tenant paths)");
  }
  q.tenant_depth = req.tenant_depth();
  q.split_preempted = req.split_preempted();
  return q;
}

void ToProto(const UsageTotals& t, v1::UsageTotals* out) {
  out->set_tflops_seconds(t.TflopsSeconds());
  out->set_physical_tflops_seconds(t.PhysicalTflopsSeconds());
  out->set_vram_gib_seconds(t.VramGibSeconds());
  out->set_spill_gib_seconds(t.SpillGibSeconds());
  out->set_device_seconds(t.device_seconds);
  out->set_mig_instance_seconds(t.mig_instance_seconds);
  out->set_slot_seconds(t.slot_seconds);
  out->set_cpu_usage_us(t.cpu_usage_us);
  out->set_peak_memory_bytes(t.peak_memory_bytes);
  out->set_intervals(t.intervals);
  out->set_milli_tflops_seconds(t.milli_tflops_seconds);
  out->set_physical_milli_tflops_seconds(t.physical_milli_tflops_seconds);
  out->set_vram_mib_seconds(t.vram_mib_seconds);
  out->set_spill_mib_seconds(t.spill_mib_seconds);
}

}  // namespace

void ServiceImpl::GetUsage(const CallContext& ctx, const v1::GetUsageRequest& req,
                           Reply<v1::GetUsageResponse> done) {
  if (!options_.usage_report) {
    return Fail(done, Status::Unimplemented("GetUsage: this server keeps no usage ledger"));
  }
  Result<UsageQuery> query = UsageQueryFromProto(req);
  if (!query.ok()) return Fail(done, query.status());
  if (!ctx.admin()) {
    if (ctx.scope.empty())
      return Fail(done, Status::PermissionDenied("usage: the caller has no tenant"));
    if (query->tenant.empty()) {
      query->tenant = ctx.scope;
    } else if (!TenantWithin(query->tenant, ctx.scope)) {
      return Fail(
          done, Status::PermissionDenied("usage: tenant '" + query->tenant +
                                         "' is outside the caller's subtree '" + ctx.scope + "'"));
    }
  }
  Result<std::vector<UsageReportRow>> rows = options_.usage_report(*query);
  if (!rows.ok()) return Fail(done, rows.status());
  v1::GetUsageResponse resp;
  UsageTotals sum;
  for (const UsageReportRow& r : *rows) {
    v1::UsageRow* out = resp.add_rows();
    SetTimestamp(r.period_start_us, out->mutable_period_start());
    out->set_tenant(r.tenant);
    out->set_pool(r.pool);
    out->set_model(r.model);
    out->set_priority_class(r.priority_class);
    out->set_mig_profile(r.mig_profile);
    out->set_service(r.service);
    out->set_preempted(r.preempted);
    ToProto(r.totals, out->mutable_totals());
    sum += r.totals;
  }
  ToProto(sum, resp.mutable_totals());
  done(Status::Ok(), std::move(resp));
}

}  // namespace gpupool::api
