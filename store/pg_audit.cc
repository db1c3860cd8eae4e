// PgStore's audit log: the append-only audit_log table (migration 60). Kept apart from the
// scheduling writer: appends have their own connection and are not fenced by the epoch.
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_retry.h"
#include "store/pg_store.h"
#include "store/validate.h"

namespace gpupool {
namespace {

constexpr char kAuditColumns[] =
    "id, time_us, key_id, principal, role, tenant, verb, resource, code, message, request_id, "
    "source";

// "job/4" → 'job/4%' with LIKE's wildcards escaped.
std::string LikeQuoted(const std::string& prefix, const std::string& suffix) {
  std::string pattern;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += suffix;
  std::string out;
  AppendQuoted(&out, pattern);
  return out;
}

void AppendRow(std::string* sql, const AuditRecord& r) {
  *sql += "(" + std::to_string(r.time_us);
  for (const std::string* text :
       {&r.key_id, &r.principal, &r.role, &r.tenant, &r.verb, &r.resource}) {
    *sql += ", ";
    AppendQuoted(sql, *text);
  }
  *sql += ", " + std::to_string(r.code);
  for (const std::string* text : {&r.message, &r.request_id, &r.source}) {
    *sql += ", ";
    AppendQuoted(sql, *text);
  }
  *sql += ")";
}

std::string SelectSql(const AuditQuery& q) {
  std::string sql = std::string("SELECT ") + kAuditColumns + " FROM audit_log WHERE true";
  auto eq = [&sql](const char* column, const std::string& value) {
    if (value.empty()) return;
    sql += std::string(" AND ") + column + " = ";
    AppendQuoted(&sql, value);
  };
  eq("principal", q.principal);
  eq("verb", q.verb);
  if (!q.resource.empty())
    sql += " AND resource LIKE " + LikeQuoted(q.resource, "%") + " ESCAPE '\\'";
  if (q.code >= 0) sql += " AND code = " + std::to_string(q.code);
  if (q.since_us != 0) sql += " AND time_us >= " + std::to_string(q.since_us);
  if (q.until_us != 0) sql += " AND time_us < " + std::to_string(q.until_us);
  if (!q.tenant_subtree.empty()) {
    sql += " AND (tenant = ";
    AppendQuoted(&sql, q.tenant_subtree);
    sql += " OR tenant LIKE " + LikeQuoted(q.tenant_subtree, "/%") + " ESCAPE '\\')";
  }
  if (q.before_id > 0) sql += " AND id < " + std::to_string(q.before_id);
  // One more than asked for: whether another page follows.
  sql += " ORDER BY id DESC LIMIT " + std::to_string(q.limit + 1);
  return sql;
}

AuditRecord ReadRecord(const pqxx::row& row) {
  AuditRecord r;
  r.id = row[0].as<int64_t>();
  r.time_us = row[1].as<int64_t>();
  r.key_id = row[2].as<std::string>();
  r.principal = row[3].as<std::string>();
  r.role = row[4].as<std::string>();
  r.tenant = row[5].as<std::string>();
  r.verb = row[6].as<std::string>();
  r.resource = row[7].as<std::string>();
  r.code = row[8].as<int32_t>();
  r.message = row[9].as<std::string>();
  r.request_id = row[10].as<std::string>();
  r.source = row[11].as<std::string>();
  return r;
}

}  // namespace

void PgStore::AppendAudit(std::vector<AuditRecord> records, Done done) {
  Status st = ValidateAuditRecords(records);
  if (st.ok() && !records.empty()) {
    std::string sql =
        "INSERT INTO audit_log (time_us, key_id, principal, role, tenant, verb, resource, code, "
        "message, request_id, source) VALUES ";
    for (size_t i = 0; i < records.size(); ++i) {
      if (i > 0) sql += ", ";
      AppendRow(&sql, records[i]);
    }
    std::lock_guard lock(audit_mu_);
    st = RunWithRetry(*audit_conn_, *target_, [&](pqxx::connection& conn) -> Status {
      pqxx::work txn(conn);
      txn.exec(sql);
      txn.commit();
      return Status::Ok();
    });
  }
  if (done) done(st);
}

Result<AuditPage> PgStore::ListAudit(const AuditQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidateAuditQuery(query));
  const std::string sql = SelectSql(query);
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_, [&](pqxx::connection& conn) -> Result<AuditPage> {
    pqxx::nontransaction txn(conn);
    pqxx::result rows = txn.exec(sql);
    AuditPage page;
    for (const auto& row : rows) {
      if (static_cast<int>(page.records.size()) == query.limit) {
        page.next_before_id = page.records.back().id;
        break;
      }
      page.records.push_back(ReadRecord(row));
    }
    return page;
  });
}

}  // namespace gpupool
