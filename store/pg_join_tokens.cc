#include "store/pg_join_tokens.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_txn.h"
#include "store/validate.h"

namespace gpupool {
namespace {

constexpr const char* kColumns =
    "id, secret_sha256, note, created_by, create_ms, expire_ms, max_uses, uses, revoke_ms, "
    "last_node, last_use_ms";

JoinTokenRecord Row(const pqxx::row& r) {
  JoinTokenRecord t;
  t.id = r[0].as<std::string>();
  t.secret_sha256 = r[1].as<std::string>();
  t.note = r[2].as<std::string>();
  t.created_by = r[3].as<std::string>();
  t.create_ms = r[4].as<int64_t>();
  t.expire_ms = r[5].as<int64_t>();
  t.max_uses = r[6].as<int64_t>();
  t.uses = r[7].as<int64_t>();
  t.revoke_ms = r[8].as<int64_t>();
  t.last_node = r[9].as<std::string>();
  t.last_use_ms = r[10].as<int64_t>();
  return t;
}

}  // namespace

Result<std::unique_ptr<PgJoinTokens>> PgJoinTokens::Open(const std::string& uri) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgJoinTokens>(
      new PgJoinTokens(std::make_unique<PgConnection>(std::move(target), "join tokens")));
}

PgJoinTokens::PgJoinTokens(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgJoinTokens::~PgJoinTokens() = default;

Status PgJoinTokens::Create(const JoinTokenRecord& t) {
  GPUPOOL_RETURN_IF_ERROR(ValidateJoinToken(t));
  MutexLock lock(&mu_);
  Result<bool> inserted = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(std::string("INSERT INTO join_tokens (") + kColumns +
                                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                                "ON CONFLICT (id) DO NOTHING RETURNING id",
                            t.id, t.secret_sha256, t.note, t.created_by, t.create_ms, t.expire_ms,
                            t.max_uses, t.uses, t.revoke_ms, t.last_node, t.last_use_ms)
                .empty();
  });
  if (!inserted.ok()) return inserted.status();
  if (!*inserted) return Status::AlreadyExists("join token " + t.id + " already exists");
  return Status::Ok();
}

Result<std::optional<JoinTokenRecord>> PgJoinTokens::Get(const std::string& id) {
  MutexLock lock(&mu_);
  return InTxn<std::optional<JoinTokenRecord>>(
      *conn_, [&](pqxx::work& txn) -> std::optional<JoinTokenRecord> {
        pqxx::result r = txn.exec_params(
            std::string("SELECT ") + kColumns + " FROM join_tokens WHERE id = $1", id);
        if (r.empty()) return std::nullopt;
        return Row(r[0]);
      });
}

Result<std::vector<JoinTokenRecord>> PgJoinTokens::List() {
  MutexLock lock(&mu_);
  return InTxn<std::vector<JoinTokenRecord>>(*conn_, [&](pqxx::work& txn) {
    std::vector<JoinTokenRecord> out;
    for (const auto& r :
         txn.exec(std::string("SELECT ") + kColumns + " FROM join_tokens ORDER BY create_ms, id")) {
      out.push_back(Row(r));
    }
    return out;
  });
}

Status PgJoinTokens::Revoke(const std::string& id, int64_t now_ms) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(
                   "UPDATE join_tokens SET revoke_ms = CASE WHEN revoke_ms = 0 THEN $2 ELSE "
                   "revoke_ms END WHERE id = $1 RETURNING id",
                   id, now_ms)
                .empty();
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound("join token " + id + " does not exist");
  return Status::Ok();
}

Status PgJoinTokens::Use(const std::string& id, const std::string& node, int64_t now_ms) {
  MutexLock lock(&mu_);
  // The WHERE is JoinTokenUsable: one statement, so racing uses leave one winner; when it
  // matches nothing, the row as it is now says why.
  Result<std::optional<JoinTokenRecord>> refused = InTxn<std::optional<JoinTokenRecord>>(
      *conn_, [&](pqxx::work& txn) -> std::optional<JoinTokenRecord> {
        pqxx::result used = txn.exec_params(
            "UPDATE join_tokens SET uses = uses + 1, last_node = $2, last_use_ms = $3 "
            "WHERE id = $1 AND revoke_ms = 0 AND (expire_ms = 0 OR $3 < expire_ms) "
            "AND (max_uses = 0 OR uses < max_uses) RETURNING id",
            id, node, now_ms);
        if (!used.empty()) return std::nullopt;
        pqxx::result r = txn.exec_params(
            std::string("SELECT ") + kColumns + " FROM join_tokens WHERE id = $1", id);
        if (r.empty()) return JoinTokenRecord{};  // id empty: unknown
        return Row(r[0]);
      });
  if (!refused.ok()) return refused.status();
  if (!*refused) return Status::Ok();
  if ((*refused)->id.empty()) return Status::NotFound("join token " + id + " does not exist");
  Status why = JoinTokenUsable(**refused, now_ms);
  return why.ok() ? Status::Aborted("join token " + id + ": changed during use; try again") : why;
}

}  // namespace gpupool
