// MemoryRegistryCredentials: the RegistryCredentialStore port (scheduler/registry_credentials.h)
// in memory, for tests that need no database. It passes the same conformance suite as
// PgRegistryCredentials (tests/store/registry_credential_conformance.cc).
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <map>
#include <utility>

#include "base/mutex.h"
#include "scheduler/registry_credentials.h"

namespace gpupool {

class MemoryRegistryCredentials final : public RegistryCredentialStore {
 public:
  Status Put(const RegistryCredentialRecord& c, bool replace) override;
  Result<std::optional<RegistryCredentialRecord>> Get(const std::string& tenant,
                                                      const std::string& name) override;
  Result<std::vector<RegistryCredentialRecord>> List(const std::string& tenant_prefix) override;
  Status Delete(const std::string& tenant, const std::string& name) override;

 private:
  Mutex mu_;
  std::map<std::pair<std::string, std::string>, RegistryCredentialRecord> rows_
      GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
