#include "store/memory_registry_credentials.h"

#include "scheduler/model.h"
#include "store/validate.h"

namespace gpupool {

Status MemoryRegistryCredentials::Put(const RegistryCredentialRecord& c, bool replace) {
  GPUPOOL_RETURN_IF_ERROR(ValidateRegistryCredential(c));
  MutexLock lock(&mu_);
  auto [it, inserted] = rows_.try_emplace({c.tenant, c.name}, c);
  if (inserted) return Status::Ok();
  if (!replace) {
    return Status::AlreadyExists("registry credential '" + c.name + "' of tenant '" + c.tenant +
                                 "' already exists");
  }
  RegistryCredentialRecord next = c;
  next.create_ms = it->second.create_ms;
  next.created_by = it->second.created_by;
  it->second = std::move(next);
  return Status::Ok();
}

Result<std::optional<RegistryCredentialRecord>> MemoryRegistryCredentials::Get(
    const std::string& tenant, const std::string& name) {
  MutexLock lock(&mu_);
  auto it = rows_.find({tenant, name});
  if (it == rows_.end()) return std::optional<RegistryCredentialRecord>();
  return std::optional<RegistryCredentialRecord>(it->second);
}

Result<std::vector<RegistryCredentialRecord>> MemoryRegistryCredentials::List(
    const std::string& tenant_prefix) {
  MutexLock lock(&mu_);
  std::vector<RegistryCredentialRecord> out;
  for (const auto& [_, c] : rows_) {
    if (!tenant_prefix.empty() && !TenantWithin(c.tenant, tenant_prefix)) continue;
    out.push_back(c);
    out.back().password.clear();
  }
  return out;
}

Status MemoryRegistryCredentials::Delete(const std::string& tenant, const std::string& name) {
  MutexLock lock(&mu_);
  if (rows_.erase({tenant, name}) == 0) {
    return Status::NotFound("registry credential '" + name + "' of tenant '" + tenant +
                            "' does not exist");
  }
  return Status::Ok();
}

}  // namespace gpupool
