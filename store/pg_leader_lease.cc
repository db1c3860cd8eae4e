#include "store/pg_leader_lease.h"

#include <unistd.h>

#include <pqxx/pqxx>

#include "base/log.h"
#include "store/pg_conn.h"

namespace gpupool {

Result<std::unique_ptr<PgLeaderLease>> PgLeaderLease::Open(const std::string& uri,
                                                           std::string holder, std::string address,
                                                           std::string http_address) {
  if (address.empty()) return Status::InvalidArgument("leader lease: the address is empty");
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgLeaderLease>(
      new PgLeaderLease(std::make_unique<PgTarget>(std::move(target)), std::move(holder),
                        std::move(address), std::move(http_address)));
}

PgLeaderLease::PgLeaderLease(std::unique_ptr<PgTarget> target, std::string holder,
                             std::string address, std::string http_address)
    : target_(std::move(target)),
      conn_(std::make_unique<PgConnection>(*target_, "lease")),
      holder_(std::move(holder)),
      address_(std::move(address)),
      http_address_(std::move(http_address)) {}

PgLeaderLease::~PgLeaderLease() = default;

std::string PgLeaderLease::DefaultHolder() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

Result<std::vector<std::vector<std::string>>> PgLeaderLease::Exec(const std::string& sql,
                                                                  int64_t lease_ms) {
  GPUPOOL_ASSIGN_OR_RETURN(pqxx::connection * conn, conn_->Get());
  try {
    pqxx::work txn(*conn);
    txn.exec("SET LOCAL statement_timeout = " +
             std::to_string(std::max<int64_t>(50, lease_ms / 2)));
    pqxx::result r = txn.exec(sql);
    txn.commit();
    std::vector<std::vector<std::string>> rows;
    for (const auto& row : r) {
      std::vector<std::string> out;
      for (const auto& field : row) out.push_back(field.is_null() ? "" : field.c_str());
      rows.push_back(std::move(out));
    }
    return rows;
  } catch (const std::exception& e) {
    Status st = PgErrorToStatus(e, *target_);
    if (IsConnectionLevel(st) || !conn->is_open()) conn_->Reset(st);
    return st;
  }
}

Result<LeaderClaim> PgLeaderLease::TryAcquire(int64_t lease_ms) {
  std::string sql = "UPDATE leader SET epoch = epoch + 1, holder = ";
  AppendQuoted(&sql, holder_);
  sql += ", address = ";
  AppendQuoted(&sql, address_);
  sql += ", http_address = ";
  AppendQuoted(&sql, http_address_);
  sql += ", expires_at = clock_timestamp() + interval '" + std::to_string(lease_ms) +
         " milliseconds' WHERE id = 1 AND expires_at < clock_timestamp() RETURNING epoch";
  GPUPOOL_ASSIGN_OR_RETURN(auto rows, Exec(sql, lease_ms));
  LeaderClaim claim;
  if (rows.size() == 1) {
    claim.leading = true;
    claim.epoch = std::stoll(rows[0][0]);
    claim.leader_address = address_;
    claim.leader_http = http_address_;
    claim.leader_holder = holder_;
    claim.leader_live = true;
    return claim;
  }
  GPUPOOL_ASSIGN_OR_RETURN(
      rows, Exec("SELECT epoch, address, holder, http_address, expires_at > clock_timestamp(),"
                 " CASE WHEN expires_at > clock_timestamp() AND expires_at < 'infinity'"
                 " THEN (EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000)::bigint"
                 " ELSE 0 END FROM leader WHERE id = 1",
                 lease_ms));
  if (rows.size() != 1) return Status::Internal("store: the leader row is missing");
  claim.epoch = std::stoll(rows[0][0]);
  claim.leader_address = rows[0][1];
  claim.leader_holder = rows[0][2];
  claim.leader_http = rows[0][3];
  claim.leader_live = rows[0][4] == "t";
  claim.expires_in_ms = std::stoll(rows[0][5]);
  return claim;
}

Status PgLeaderLease::Renew(int64_t epoch, int64_t lease_ms) {
  GPUPOOL_ASSIGN_OR_RETURN(
      auto rows, Exec("UPDATE leader SET expires_at = clock_timestamp() + interval '" +
                          std::to_string(lease_ms) + " milliseconds' WHERE id = 1 AND epoch = " +
                          std::to_string(epoch) + " AND expires_at > clock_timestamp() RETURNING 1",
                      lease_ms));
  if (rows.empty()) {
    return Status::Aborted("leader lease of epoch " + std::to_string(epoch) +
                           " expired or taken by another replica");
  }
  return Status::Ok();
}

void PgLeaderLease::Release(int64_t epoch) {
  Result<std::vector<std::vector<std::string>>> r =
      Exec("UPDATE leader SET expires_at = '-infinity' WHERE id = 1 AND epoch = " +
               std::to_string(epoch),
           1000);
  if (!r.ok())
    LogWarn("store", "could not release the leader lease", {{"error", r.status().message()}});
}

}  // namespace gpupool
