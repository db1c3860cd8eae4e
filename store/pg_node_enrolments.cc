#include "store/pg_node_enrolments.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"

namespace gpupool {
namespace {

Status CheckRow(const NodeEnrolment& e) {
  if (e.node.empty()) return Status::InvalidArgument("node enrolment: the node name is empty");
  if (e.serial_hex.empty()) {
    return Status::InvalidArgument("node enrolment of '" + e.node + "': the serial is empty");
  }
  return Status::Ok();
}

// Runs `fn(txn)` in one transaction on `conn`, mapping exceptions to Status and dropping a
// broken connection so that the next call reconnects.
template <typename T, typename Fn>
Result<T> InTxn(PgConnection& conn, Fn fn) {
  Result<pqxx::connection*> c = conn.Get();
  if (!c.ok()) return c.status();
  try {
    pqxx::work txn(**c);
    T out = fn(txn);
    txn.commit();
    return out;
  } catch (const std::exception& e) {
    Status s = PgErrorToStatus(e, conn.target()).WithContext("node enrolments");
    if (IsConnectionLevel(s)) conn.Reset(s);
    return s;
  }
}

}  // namespace

Result<std::unique_ptr<PgNodeEnrolments>> PgNodeEnrolments::Open(const std::string& uri) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgNodeEnrolments>(
      new PgNodeEnrolments(std::make_unique<PgConnection>(std::move(target), "node enrolments")));
}

PgNodeEnrolments::PgNodeEnrolments(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgNodeEnrolments::~PgNodeEnrolments() = default;

Result<std::optional<NodeEnrolment>> PgNodeEnrolments::Get(const std::string& node) {
  MutexLock lock(&mu_);
  return InTxn<std::optional<NodeEnrolment>>(
      *conn_, [&](pqxx::work& txn) -> std::optional<NodeEnrolment> {
        pqxx::result r = txn.exec_params(
            "SELECT serial_hex, not_after_s, revoked FROM node_enrolments WHERE node = $1", node);
        if (r.empty()) return std::nullopt;
        return NodeEnrolment{node, r[0][0].as<std::string>(), r[0][1].as<int64_t>(),
                             r[0][2].as<bool>()};
      });
}

Status PgNodeEnrolments::Bind(const NodeEnrolment& e, const std::string& expected_serial) {
  GPUPOOL_RETURN_IF_ERROR(CheckRow(e));
  MutexLock lock(&mu_);
  Result<bool> bound = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    // A Join inserts, or takes over a revoked row; a Renew replaces the live row's serial. Each
    // is one statement whose WHERE is the compare-and-set.
    pqxx::result r =
        expected_serial.empty()
            ? txn.exec_params(
                  "INSERT INTO node_enrolments (node, serial_hex, not_after_s, revoked) "
                  "VALUES ($1, $2, $3, false) ON CONFLICT (node) DO UPDATE SET "
                  "serial_hex = EXCLUDED.serial_hex, not_after_s = EXCLUDED.not_after_s, "
                  "revoked = false, updated_at = now() WHERE node_enrolments.revoked "
                  "RETURNING node",
                  e.node, e.serial_hex, e.not_after_s)
            : txn.exec_params(
                  "UPDATE node_enrolments SET serial_hex = $2, not_after_s = $3, "
                  "updated_at = now() WHERE node = $1 AND NOT revoked AND serial_hex = $4 "
                  "RETURNING node",
                  e.node, e.serial_hex, e.not_after_s, expected_serial);
    return !r.empty();
  });
  if (!bound.ok()) return bound.status();
  if (!*bound) return Status::FailedPrecondition("node '" + e.node + "': its binding has changed");
  return Status::Ok();
}

Status PgNodeEnrolments::Revoke(const std::string& node) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(
                   "UPDATE node_enrolments SET revoked = true, updated_at = now() "
                   "WHERE node = $1 RETURNING node",
                   node)
                .empty();
  });
  if (!found.ok()) return found.status();
  if (!*found) return Status::NotFound("node '" + node + "' was never enrolled");
  return Status::Ok();
}

Result<int> PgNodeEnrolments::Import(const std::vector<NodeEnrolment>& rows) {
  for (const NodeEnrolment& e : rows) GPUPOOL_RETURN_IF_ERROR(CheckRow(e));
  MutexLock lock(&mu_);
  return InTxn<int>(*conn_, [&](pqxx::work& txn) {
    int added = 0;
    for (const NodeEnrolment& e : rows) {
      added += static_cast<int>(
          txn.exec_params("INSERT INTO node_enrolments (node, serial_hex, not_after_s, revoked) "
                          "VALUES ($1, $2, $3, $4) ON CONFLICT (node) DO NOTHING RETURNING node",
                          e.node, e.serial_hex, e.not_after_s, e.revoked)
              .size());
    }
    return added;
  });
}

}  // namespace gpupool
