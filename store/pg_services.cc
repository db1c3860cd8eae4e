#include "store/pg_services.h"

#include <pqxx/pqxx>

#include "store/pg_columns.h"
#include "store/pg_conn.h"
#include "store/pg_sql.h"
#include "store/pg_txn.h"
#include "store/validate.h"

namespace gpupool {
namespace {

// The columns of `services` that List reads, in this order; a revision's (port, readiness path
// and template) follow them, then the previous revision's generation and columns.
#define GP_SERVICE_COLS                                                               \
  "s.id, s.tenant, s.name, s.pool, s.priority_class, s.preemptible, s.min_replicas, " \
  "s.max_replicas, s.target_in_flight, s.idle_ms, s.max_surge, s.max_unavailable, "   \
  "s.generation, s.created_by, s.create_ms, s.update_ms"
constexpr int kServiceColumns = 16;
#define GP_REVISION_COLS "port, readiness_path, " GP_TEMPLATE_COLS
constexpr int kRevisionColumns = 2 + kTemplateColumns;

// Every service with its current revision (cur) and the newest one before it (prev), in one
// statement, so one snapshot.
constexpr const char* kSelectServices =
    "SELECT " GP_SERVICE_COLS
    ", cur.*, prev.* FROM services s "
    "LEFT JOIN LATERAL (SELECT " GP_REVISION_COLS
    " FROM service_revisions r WHERE r.service_id = s.id AND r.generation = s.generation) cur "
    "ON true "
    "LEFT JOIN LATERAL (SELECT generation, " GP_REVISION_COLS
    " FROM service_revisions r WHERE r.service_id = s.id AND r.generation < s.generation "
    "ORDER BY r.generation DESC LIMIT 1) prev ON true "
    "ORDER BY s.id";

std::string InsertRevisionSql(int64_t id, int64_t generation, const ServiceRevision& r) {
  std::string sql =
      "INSERT INTO service_revisions (service_id, generation, " GP_REVISION_COLS ") VALUES (";
  sql += std::to_string(id) + ", " + std::to_string(generation) + ", " + std::to_string(r.port);
  sql += ", ";
  AppendQuoted(&sql, r.readiness_path);
  sql += ", ";
  AppendTemplateValues(&sql, r.task_template);
  sql += ")";
  return sql;
}

Result<ServiceRevision> ReadRevision(const pqxx::row& r, int first, const std::string& what) {
  ServiceRevision rev;
  rev.port = r[static_cast<pqxx::row::size_type>(first)].as<int32_t>();
  rev.readiness_path = r[static_cast<pqxx::row::size_type>(first + 1)].c_str();
  GPUPOOL_ASSIGN_OR_RETURN(rev.task_template, ReadTemplate(r, first + 2, what));
  return rev;
}

Result<ServiceRecord> ReadService(const pqxx::row& r) {
  ServiceRecord s;
  ServiceSpec& p = s.spec;
  s.id = r[0].as<int64_t>();
  p.tenant = r[1].c_str();
  p.name = r[2].c_str();
  p.pool = r[3].c_str();
  p.priority_class = r[4].c_str();
  p.preemptible = r[5].as<bool>();
  p.min_replicas = r[6].as<int32_t>();
  p.max_replicas = r[7].as<int32_t>();
  p.target_in_flight = r[8].as<int32_t>();
  p.idle_ms = r[9].as<int64_t>();
  p.max_surge = r[10].as<int32_t>();
  p.max_unavailable = r[11].as<int32_t>();
  s.generation = r[12].as<int64_t>();
  p.created_by = r[13].c_str();
  s.create_ms = r[14].as<int64_t>();
  s.update_ms = r[15].as<int64_t>();
  const std::string what = "service " + std::to_string(s.id);
  constexpr int cur = kServiceColumns;
  if (r[cur].is_null()) {
    return Status::Internal(what + ": revision " + std::to_string(s.generation) + " is missing");
  }
  GPUPOOL_ASSIGN_OR_RETURN(p.revision, ReadRevision(r, cur, what));
  constexpr int prev = cur + kRevisionColumns;  // its generation, then its columns
  if (!r[prev].is_null()) {
    GPUPOOL_ASSIGN_OR_RETURN(s.previous, ReadRevision(r, prev + 1, what));
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<PgServices>> PgServices::Open(const std::string& uri) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgServices>(
      new PgServices(std::make_unique<PgConnection>(std::move(target), "services")));
}

PgServices::PgServices(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgServices::~PgServices() = default;

Result<ServiceRecord> PgServices::Create(const ServiceRecord& s) {
  GPUPOOL_RETURN_IF_ERROR(ValidateService(s));
  const ServiceSpec& p = s.spec;
  MutexLock lock(&mu_);
  // 0: the name is taken (nothing written).
  Result<int64_t> id = InTxn<int64_t>(*conn_, [&](pqxx::work& txn) -> int64_t {
    pqxx::result r = txn.exec_params(
        "INSERT INTO services (tenant, name, pool, priority_class, preemptible, min_replicas, "
        "max_replicas, target_in_flight, idle_ms, max_surge, max_unavailable, generation, "
        "created_by, create_ms, update_ms) VALUES "
        "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12, $13, $14) "
        "ON CONFLICT (tenant, name) DO NOTHING RETURNING id",
        p.tenant, p.name, p.pool, p.priority_class, p.preemptible, p.min_replicas, p.max_replicas,
        p.target_in_flight, p.idle_ms, p.max_surge, p.max_unavailable, p.created_by, s.create_ms,
        s.update_ms);
    if (r.empty()) return 0;
    const int64_t assigned = r[0][0].as<int64_t>();
    txn.exec(InsertRevisionSql(assigned, 1, p.revision));
    return assigned;
  });
  if (!id.ok()) return id.status();
  if (*id == 0) return Status::AlreadyExists(ServiceExistsMessage(p.tenant, p.name));
  ServiceRecord out = s;
  out.id = *id;
  out.generation = 1;
  out.previous.reset();
  return out;
}

Status PgServices::Update(const ServiceRecord& next, int64_t expected_generation) {
  GPUPOOL_RETURN_IF_ERROR(ValidateServiceUpdate(next, expected_generation));
  const ServiceSpec& p = next.spec;
  const bool rollout = next.generation == expected_generation + 1;
  // The stored generation when the update did not apply (nullopt: no such service), or
  // expected_generation when it did.
  struct Outcome {
    bool updated = false;
    std::optional<int64_t> stored;
  };
  MutexLock lock(&mu_);
  Result<Outcome> outcome = InTxn<Outcome>(*conn_, [&](pqxx::work& txn) -> Outcome {
    // Tenant, name, pool, creator and creation time never change.
    pqxx::result r = txn.exec_params(
        "UPDATE services SET priority_class = $3, preemptible = $4, min_replicas = $5, "
        "max_replicas = $6, target_in_flight = $7, idle_ms = $8, max_surge = $9, "
        "max_unavailable = $10, generation = $11, update_ms = $12 "
        "WHERE id = $1 AND generation = $2 RETURNING id",
        next.id, expected_generation, p.priority_class, p.preemptible, p.min_replicas,
        p.max_replicas, p.target_in_flight, p.idle_ms, p.max_surge, p.max_unavailable,
        next.generation, next.update_ms);
    if (r.empty()) {
      pqxx::result g = txn.exec_params("SELECT generation FROM services WHERE id = $1", next.id);
      if (g.empty()) return Outcome{};
      return Outcome{false, g[0][0].as<int64_t>()};
    }
    if (rollout) {
      txn.exec(InsertRevisionSql(next.id, next.generation, p.revision));
      txn.exec_params("DELETE FROM service_revisions WHERE service_id = $1 AND generation <= $2",
                      next.id, next.generation - kServiceRevisionsKept);
    }
    return Outcome{true, expected_generation};
  });
  if (!outcome.ok()) return outcome.status();
  if (outcome->updated) return Status::Ok();
  if (!outcome->stored) return Status::NotFound(ServiceNotFoundMessage(next.id));
  return Status::Aborted(ServiceChangedMessage(next.id, *outcome->stored));
}

Status PgServices::Delete(int64_t id) {
  MutexLock lock(&mu_);
  // The revisions go with it (ON DELETE CASCADE).
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params("DELETE FROM services WHERE id = $1 RETURNING id", id).empty();
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound(ServiceNotFoundMessage(id));
  return Status::Ok();
}

Result<std::vector<ServiceRecord>> PgServices::List() {
  MutexLock lock(&mu_);
  Result<pqxx::result> rows =
      InTxn<pqxx::result>(*conn_, [&](pqxx::work& txn) { return txn.exec(kSelectServices); });
  if (!rows.ok()) return rows.status();
  std::vector<ServiceRecord> out;
  out.reserve(rows->size());
  for (const auto& r : *rows) {
    GPUPOOL_ASSIGN_OR_RETURN(ServiceRecord s, ReadService(r));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpupool
