// The tenancy half of api/convert.h: tenants, quotas and quota amounts (with SKU units).
#include <string>

#include "api/convert.h"

namespace gpupool::api {
namespace {

bool HasResources(const v1::QuotaAmount& a) {
  return a.has_resources() && (a.resources().milli_tflops() != 0 || a.resources().vram_mib() != 0);
}

}  // namespace

Result<TenantRecord> TenantFromProto(const v1::Tenant& tenant, std::string_view field) {
  GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(tenant.path(), FieldPath(field, "path")));
  // Quotas are output only here; dropping them silently would lose what the caller meant.
  if (tenant.quotas_size() > 0) {
    return Invalid(FieldPath(field, "quotas"), "output only; set quotas with SetQuota");
  }
  TenantRecord t;
  t.path = tenant.path();
  return t;
}

Result<QuotaAmount> QuotaAmountFromProto(const v1::QuotaAmount& amount,
                                         const SchedulerOptions& options, std::string_view field) {
  const std::string sku_field = FieldPath(field, "sku");
  const std::string count_field = FieldPath(field, "sku_count");
  if (!amount.sku().empty()) {
    if (HasResources(amount) || amount.devices() != 0) {
      return Invalid(field, "give either resources and devices, or sku and sku_count, not both");
    }
    GPUPOOL_RETURN_IF_ERROR(ValidateName(amount.sku(), sku_field));
    GPUPOOL_RETURN_IF_ERROR(CheckRange(amount.sku_count(), 1, kMaxQuotaSkuCount, count_field));
    Result<QuotaAmount> a = QuotaInSkuUnits(options, amount.sku(), amount.sku_count());
    if (!a.ok()) return Status(a.status().code(), sku_field + ": " + a.status().message());
    return a;
  }
  if (amount.sku_count() != 0) {
    return Invalid(count_field,
                   "only with sku, got " + std::to_string(amount.sku_count()) + " and no sku");
  }
  const std::string res = FieldPath(field, "resources");
  QuotaAmount a;
  a.resources.milli_tflops = amount.resources().milli_tflops();
  a.resources.vram_mib = amount.resources().vram_mib();
  a.devices = amount.devices();
  GPUPOOL_RETURN_IF_ERROR(CheckRange(a.resources.milli_tflops, 0, kMaxQuotaMilliTflops,
                                     FieldPath(res, "milli_tflops")));
  GPUPOOL_RETURN_IF_ERROR(
      CheckRange(a.resources.vram_mib, 0, kMaxQuotaVramMib, FieldPath(res, "vram_mib")));
  GPUPOOL_RETURN_IF_ERROR(CheckRange(a.devices, 0, kMaxQuotaDevices, FieldPath(field, "devices")));
  return a;
}

Result<QuotaRecord> QuotaFromProto(const v1::Quota& quota, const SchedulerOptions& options,
                                   std::string_view field) {
  QuotaRecord q;
  GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(quota.tenant(), FieldPath(field, "tenant")));
  GPUPOOL_RETURN_IF_ERROR(ValidateName(quota.pool(), FieldPath(field, "pool")));
  q.tenant = quota.tenant();
  q.pool = quota.pool();
  GPUPOOL_ASSIGN_OR_RETURN(q.guaranteed, QuotaAmountFromProto(quota.guaranteed(), options,
                                                              FieldPath(field, "guaranteed")));
  GPUPOOL_ASSIGN_OR_RETURN(q.limit,
                           QuotaAmountFromProto(quota.limit(), options, FieldPath(field, "limit")));
  return q;
}

void ToProto(const QuotaAmount& amount, v1::QuotaAmount* out) {
  out->mutable_resources()->set_milli_tflops(amount.resources.milli_tflops);
  out->mutable_resources()->set_vram_mib(amount.resources.vram_mib);
  out->set_devices(amount.devices);
}

void ToProto(const QuotaView& quota, v1::Quota* out) {
  out->set_tenant(quota.quota.tenant);
  out->set_pool(quota.quota.pool);
  ToProto(quota.quota.guaranteed, out->mutable_guaranteed());
  ToProto(quota.quota.limit, out->mutable_limit());
  ToProto(quota.used, out->mutable_used());
  ToProto(quota.borrowed, out->mutable_borrowed());
}

void ToProto(const TenantView& tenant, v1::Tenant* out) {
  out->set_path(tenant.tenant.path);
  for (const QuotaView& q : tenant.quotas) ToProto(q, out->add_quotas());
  if (tenant.tenant.create_us > 0)
    SetTimestamp(tenant.tenant.create_us, out->mutable_create_time());
}

}  // namespace gpupool::api
