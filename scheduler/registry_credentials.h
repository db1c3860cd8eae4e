// Registry credentials stored once per tenant (docs/images.md, "Private registries"): a tenant
// keeps the user name and secret its private images are pulled with, and its jobs name the
// credential instead of carrying it. The secret is written once and never shown back: lists
// carry names, registries and user names only.
//
// RegistryCredentialStore is the port that keeps them, beside the Store port (like ApiKeyStore):
// credentials are not scheduling state, are read when a task starts, and must not queue behind
// the core's group commits. store/pg_registry_credentials.h keeps them in PostgreSQL with the
// secret sealed at rest; store/memory_registry_credentials.h in memory for tests.
//
// Errors: UNAVAILABLE when the database cannot be reached; ALREADY_EXISTS from Put of a name the
// tenant has, unless replacing; NOT_FOUND from Delete of an unknown one; FAILED_PRECONDITION when
// the store has no secrets key to seal with.
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/dispatch.h"

namespace gpupool {

struct RegistryCredentialRecord {
  std::string tenant;    // the owner, a tenant path; its subtree may use it
  std::string name;      // [a-z0-9][a-z0-9._-]*, at most 63 characters
  std::string registry;  // the registry it is for, as an image reference names it ("docker.io")
  std::string username;
  std::string password;  // the secret (a password or token); empty in List results
  std::string created_by;
  int64_t create_ms = 0;
  int64_t update_ms = 0;  // the last replacement (== create_ms until then)
};

class RegistryCredentialStore {
 public:
  virtual ~RegistryCredentialStore() = default;
  // Stores `c`. With `replace`, an existing credential of that name is replaced (its create_ms
  // and created_by kept); without, it is ALREADY_EXISTS.
  virtual Status Put(const RegistryCredentialRecord& c, bool replace) = 0;
  // The credential with its secret; nullopt when the tenant has none of that name.
  virtual Result<std::optional<RegistryCredentialRecord>> Get(const std::string& tenant,
                                                              const std::string& name) = 0;
  // Credentials of `tenant_prefix` and its subtree ("" = all), by tenant then name; secrets empty.
  virtual Result<std::vector<RegistryCredentialRecord>> List(const std::string& tenant_prefix) = 0;
  virtual Status Delete(const std::string& tenant, const std::string& name) = 0;
};

// INVALID_ARGUMENT naming `field` unless `name` is [a-z0-9][a-z0-9._-]*, at most 63 characters.
Status CheckRegistryCredentialName(const std::string& name, const std::string& field);

// The registry host of `registry` as image references name it ("docker.io" for
// "index.docker.io"), or INVALID_ARGUMENT naming `field`.
Result<std::string> NormaliseRegistryHost(const std::string& registry, const std::string& field);

// The credential `name` a job of `tenant` may use: the tenant's own, else that of its nearest
// ancestor ("acme/research" may use one kept by "acme"); nullopt when none has it.
Result<std::optional<RegistryCredentialRecord>> ResolveRegistryCredential(
    RegistryCredentialStore& store, const std::string& tenant, const std::string& name);

// The environment entry that carries a stored credential to the node. The GPUPOOL_ prefix is
// refused in a job's env, so it cannot collide with one; the agent takes it out of the task's
// environment before anything starts, as it does a job's own credential entry.
inline constexpr char kStoredRegistryCredentialEnv[] = "GPUPOOL_REGISTRY_CREDENTIAL";

// The AgentGateway the daemon gives the scheduler: a StartTask whose image names a stored
// credential (a registry_credential that is not one of the job's own secret env entries) leaves
// with it, read from `store` at that moment, so a rotated credential is used by the next start
// and a deleted one by none. A credential for another registry than the image's is never sent
// (it would hand the secret to that registry); nor is one that is gone: the task then pulls
// without one and the registry's refusal names it. Everything else passes through unchanged.
//
// Cost: one indexed read per start of a task that names a stored credential, on the core's
// thread; other starts read nothing.
class CredentialInjectingGateway final : public AgentGateway {
 public:
  // REQUIRES: both outlive this.
  CredentialInjectingGateway(AgentGateway* inner, RegistryCredentialStore* store)
      : inner_(inner), store_(store) {}

  bool StartTask(const std::string& node, const StartTaskCommand& cmd) override;
  bool StopTask(const std::string& node, const StopTaskCommand& cmd) override {
    return inner_->StopTask(node, cmd);
  }
  bool PinImages(const std::string& node, const PinImagesCommand& cmd) override {
    return inner_->PinImages(node, cmd);
  }
  bool SetMigLayout(const std::string& node, const MigLayoutCommand& cmd) override {
    return inner_->SetMigLayout(node, cmd);
  }

  // `cmd` as it leaves: with the stored credential when it names one (see above).
  StartTaskCommand WithCredential(const StartTaskCommand& cmd) const;

 private:
  AgentGateway* const inner_;
  RegistryCredentialStore* const store_;
};

}  // namespace gpupool
