// PgRegistryCredentials: the RegistryCredentialStore port (scheduler/registry_credentials.h) on
// PostgreSQL, table `registry_credentials` (migration 31). The secret is sealed with the daemon's
// secrets key, bound to its tenant and name (store/pg_secrets.h), and re-sealed with every other
// secret when the key rotates. Every replica reads the same rows: a credential rotated or deleted
// through one is used or refused by the others at the next task start, with no cache.
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h).
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>

#include "base/crypto/secret_box.h"
#include "base/mutex.h"
#include "scheduler/registry_credentials.h"

namespace gpupool {

class PgConnection;

class PgRegistryCredentials final : public RegistryCredentialStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open.
  // Without a keyring Put and Get are FAILED_PRECONDITION (a secret is never stored in clear).
  static Result<std::unique_ptr<PgRegistryCredentials>> Open(
      const std::string& uri, std::shared_ptr<const SecretKeyring> keyring);
  ~PgRegistryCredentials() override;

  Status Put(const RegistryCredentialRecord& c, bool replace) override;
  Result<std::optional<RegistryCredentialRecord>> Get(const std::string& tenant,
                                                      const std::string& name) override;
  Result<std::vector<RegistryCredentialRecord>> List(const std::string& tenant_prefix) override;
  Status Delete(const std::string& tenant, const std::string& name) override;

 private:
  PgRegistryCredentials(std::unique_ptr<PgConnection> conn,
                        std::shared_ptr<const SecretKeyring> keyring);

  const std::shared_ptr<const SecretKeyring> keyring_;
  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
