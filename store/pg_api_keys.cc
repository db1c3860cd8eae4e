#include "store/pg_api_keys.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_txn.h"

namespace gpupool {
namespace {

constexpr char kColumns[] =
    "id, name, tenant, role, secret_sha256, created_by, create_ms, expire_ms, revoke_ms";

ApiKeyRecord FromRow(const pqxx::row& r) {
  ApiKeyRecord k;
  k.id = r["id"].as<std::string>();
  k.name = r["name"].as<std::string>();
  k.tenant = r["tenant"].as<std::string>();
  k.role = r["role"].as<std::string>();
  k.secret_sha256 = r["secret_sha256"].as<std::string>();
  k.created_by = r["created_by"].as<std::string>();
  k.create_ms = r["create_ms"].as<int64_t>();
  k.expire_ms = r["expire_ms"].as<int64_t>();
  k.revoke_ms = r["revoke_ms"].as<int64_t>();
  return k;
}

}  // namespace

Result<std::unique_ptr<PgApiKeyStore>> PgApiKeyStore::Open(const std::string& uri) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgApiKeyStore>(
      new PgApiKeyStore(std::make_unique<PgConnection>(std::move(target), "api keys")));
}

PgApiKeyStore::PgApiKeyStore(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgApiKeyStore::~PgApiKeyStore() = default;

Status PgApiKeyStore::Create(const ApiKeyRecord& k) {
  std::lock_guard lock(mu_);
  return InTxn<bool>(
             *conn_,
             [&](pqxx::work& txn) {
               txn.exec_params(
                   "INSERT INTO api_keys (id, name, tenant, role, secret_sha256, created_by, "
                   "create_ms, expire_ms, revoke_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0)",
                   k.id, k.name, k.tenant, k.role, k.secret_sha256, k.created_by, k.create_ms,
                   k.expire_ms);
               return true;
             })
      .status();
}

Result<std::optional<ApiKeyRecord>> PgApiKeyStore::Get(const std::string& id) {
  std::lock_guard lock(mu_);
  return InTxn<std::optional<ApiKeyRecord>>(
      *conn_, [&](pqxx::work& txn) -> std::optional<ApiKeyRecord> {
        pqxx::result r =
            txn.exec_params(std::string("SELECT ") + kColumns + " FROM api_keys WHERE id = $1", id);
        if (r.empty()) return std::nullopt;
        return FromRow(r[0]);
      });
}

Result<std::vector<ApiKeyRecord>> PgApiKeyStore::List(const std::string& prefix) {
  std::lock_guard lock(mu_);
  return InTxn<std::vector<ApiKeyRecord>>(*conn_, [&](pqxx::work& txn) {
    pqxx::result r = txn.exec_params(
        std::string("SELECT ") + kColumns +
            " FROM api_keys WHERE $1 = '' OR tenant = $1 OR left(tenant, length($1) + 1) = $1 "
            "|| '/' ORDER BY create_ms, id",
        prefix);
    std::vector<ApiKeyRecord> out;
    for (const auto& row : r) out.push_back(FromRow(row));
    return out;
  });
}

Result<ApiKeyRecord> PgApiKeyStore::Revoke(const std::string& id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  Result<std::optional<ApiKeyRecord>> r = InTxn<std::optional<ApiKeyRecord>>(
      *conn_, [&](pqxx::work& txn) -> std::optional<ApiKeyRecord> {
        pqxx::result res = txn.exec_params(
            std::string("UPDATE api_keys SET revoke_ms = CASE WHEN revoke_ms = 0 THEN $2 ELSE "
                        "revoke_ms END WHERE id = $1 RETURNING ") +
                kColumns,
            id, now_ms);
        if (res.empty()) return std::nullopt;
        return FromRow(res[0]);
      });
  if (!r.ok()) return r.status();
  if (!r->has_value()) return Status::NotFound("API key '" + id + "' not found");
  return std::move(**r);
}

}  // namespace gpupool
