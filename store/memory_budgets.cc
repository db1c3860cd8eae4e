#include "store/memory_budgets.h"

#include "scheduler/model.h"

namespace gpupool {

Status MemoryBudgets::Put(const billing::Budget& b) {
  billing::Budget next = b;
  GPUPOOL_RETURN_IF_ERROR(billing::NormalizeBudget(&next));
  MutexLock lock(&mu_);
  rows_[next.tenant] = std::move(next);
  return Status::Ok();
}

Result<std::vector<billing::Budget>> MemoryBudgets::List(const std::string& tenant_prefix) {
  MutexLock lock(&mu_);
  std::vector<billing::Budget> out;
  for (const auto& [tenant, b] : rows_) {
    if (tenant_prefix.empty() || TenantWithin(tenant, tenant_prefix)) out.push_back(b);
  }
  return out;
}

Status MemoryBudgets::Delete(const std::string& tenant) {
  MutexLock lock(&mu_);
  if (rows_.erase(tenant) == 0) {
    return Status::NotFound("tenant '" + tenant + "' has no budget");
  }
  return Status::Ok();
}

}  // namespace gpupool
