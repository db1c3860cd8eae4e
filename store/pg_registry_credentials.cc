#include "store/pg_registry_credentials.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_secrets.h"
#include "store/pg_txn.h"
#include "store/validate.h"

namespace gpupool {
namespace {

constexpr const char* kColumns =
    "tenant, name, registry, username, password, created_by, create_ms, update_ms";

RegistryCredentialRecord Row(const pqxx::row& r) {
  RegistryCredentialRecord c;
  c.tenant = r[0].as<std::string>();
  c.name = r[1].as<std::string>();
  c.registry = r[2].as<std::string>();
  c.username = r[3].as<std::string>();
  c.password = r[4].as<std::string>();  // sealed here; opened by the caller
  c.created_by = r[5].as<std::string>();
  c.create_ms = r[6].as<int64_t>();
  c.update_ms = r[7].as<int64_t>();
  return c;
}

std::string Describe(const std::string& tenant, const std::string& name) {
  return "registry credential '" + name + "' of tenant '" + tenant + "'";
}

}  // namespace

Result<std::unique_ptr<PgRegistryCredentials>> PgRegistryCredentials::Open(
    const std::string& uri, std::shared_ptr<const SecretKeyring> keyring) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgRegistryCredentials>(new PgRegistryCredentials(
      std::make_unique<PgConnection>(std::move(target), "registry credentials"),
      std::move(keyring)));
}

PgRegistryCredentials::PgRegistryCredentials(std::unique_ptr<PgConnection> conn,
                                             std::shared_ptr<const SecretKeyring> keyring)
    : keyring_(std::move(keyring)), conn_(std::move(conn)) {}
PgRegistryCredentials::~PgRegistryCredentials() = default;

Status PgRegistryCredentials::Put(const RegistryCredentialRecord& c, bool replace) {
  GPUPOOL_RETURN_IF_ERROR(ValidateRegistryCredential(c));
  if (keyring_ == nullptr) {
    return Status::FailedPrecondition(
        "registry credentials need a secrets key to be sealed with, and this daemon has none");
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::string sealed,
                           keyring_->Seal(c.password, RegistryCredentialContext(c.tenant, c.name)));
  MutexLock lock(&mu_);
  // A replacement keeps who created it and when.
  const std::string conflict =
      replace ? "DO UPDATE SET registry = EXCLUDED.registry, username = EXCLUDED.username, "
                "password = EXCLUDED.password, update_ms = EXCLUDED.update_ms"
              : "DO NOTHING";
  Result<bool> stored = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(std::string("INSERT INTO registry_credentials (") + kColumns +
                                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                                "ON CONFLICT (tenant, name) " +
                                conflict + " RETURNING name",
                            c.tenant, c.name, c.registry, c.username, sealed, c.created_by,
                            c.create_ms, c.update_ms)
                .empty();
  });
  if (!stored.ok()) return stored.status();
  if (!*stored) return Status::AlreadyExists(Describe(c.tenant, c.name) + " already exists");
  return Status::Ok();
}

Result<std::optional<RegistryCredentialRecord>> PgRegistryCredentials::Get(
    const std::string& tenant, const std::string& name) {
  Result<std::optional<RegistryCredentialRecord>> row = [&] {
    MutexLock lock(&mu_);
    return InTxn<std::optional<RegistryCredentialRecord>>(
        *conn_, [&](pqxx::work& txn) -> std::optional<RegistryCredentialRecord> {
          pqxx::result r = txn.exec_params(std::string("SELECT ") + kColumns +
                                               " FROM registry_credentials "
                                               "WHERE tenant = $1 AND name = $2",
                                           tenant, name);
          if (r.empty()) return std::nullopt;
          return Row(r[0]);
        });
  }();
  if (!row.ok() || !row->has_value()) return row;
  RegistryCredentialRecord& c = **row;
  GPUPOOL_ASSIGN_OR_RETURN(
      c.password, OpenStored(keyring_.get(), c.password, RegistryCredentialContext(tenant, name),
                             Describe(tenant, name)));
  return row;
}

Result<std::vector<RegistryCredentialRecord>> PgRegistryCredentials::List(
    const std::string& tenant_prefix) {
  MutexLock lock(&mu_);
  return InTxn<std::vector<RegistryCredentialRecord>>(*conn_, [&](pqxx::work& txn) {
    std::vector<RegistryCredentialRecord> out;
    // The subtree of a path: itself and what starts with "<path>/" (no LIKE: '_' and '%' are
    // literal in tenant paths).
    for (const auto& r :
         txn.exec_params(std::string("SELECT ") + kColumns +
                             " FROM registry_credentials WHERE $1 = '' OR tenant = $1 OR "
                             "left(tenant, length($1) + 1) = $1 || '/' ORDER BY tenant COLLATE "
                             "\"C\", name COLLATE \"C\"",
                         tenant_prefix)) {
      out.push_back(Row(r));
      out.back().password.clear();
    }
    return out;
  });
}

Status PgRegistryCredentials::Delete(const std::string& tenant, const std::string& name) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(
                   "DELETE FROM registry_credentials WHERE tenant = $1 AND name = $2 "
                   "RETURNING name",
                   tenant, name)
                .empty();
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound(Describe(tenant, name) + " does not exist");
  return Status::Ok();
}

}  // namespace gpupool
