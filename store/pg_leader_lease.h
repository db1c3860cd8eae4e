// PgLeaderLease: the LeaderLease port (scheduler/leadership.h) on PostgreSQL — the `leader` row
// (migrations 50, 51) with the leader's API and REST addresses and an expiry on the database's own
// clock, so replicas on different machines need no synchronised clocks, only the one database.
//
//   TryAcquire: UPDATE leader SET epoch = epoch + 1, holder, address, expires_at = now + lease
//               WHERE expires_at < clock_timestamp()   (one statement: two replicas cannot both
//               win; the row lock serialises them)
//   Renew:      UPDATE … SET expires_at = now + lease WHERE epoch = ours   (0 rows: ABORTED)
//   Release:    UPDATE … SET expires_at = '-infinity' WHERE epoch = ours
// The new epoch fences the old leader's writes (gp_fence compares epochs, and refuses a
// replica's writes once its lease has expired).
//
// It has its own connection, so a long Recover() or a queue of writes never delays a renewal;
// statements time out after half a lease. Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/leadership.h"

namespace gpupool {

class PgConnection;
struct PgTarget;

class PgLeaderLease final : public LeaderLease {
 public:
  // `address` is what clients should be told to use (non-empty); `holder` names the replica;
  // `http_address` is its REST base URL (migration 51; may be empty).
  static Result<std::unique_ptr<PgLeaderLease>> Open(const std::string& uri, std::string holder,
                                                     std::string address,
                                                     std::string http_address = "");
  ~PgLeaderLease() override;
  // "<hostname>:<pid>".
  static std::string DefaultHolder();

  Result<LeaderClaim> TryAcquire(int64_t lease_ms) override;
  Status Renew(int64_t epoch, int64_t lease_ms) override;
  void Release(int64_t epoch) override;

 private:
  PgLeaderLease(std::unique_ptr<PgTarget> target, std::string holder, std::string address,
                std::string http_address);
  // Runs `sql` in its own transaction (statement timeout: half a lease); the rows it returned.
  Result<std::vector<std::vector<std::string>>> Exec(const std::string& sql, int64_t lease_ms);

  std::unique_ptr<PgTarget> target_;
  std::unique_ptr<PgConnection> conn_;
  const std::string holder_;
  const std::string address_;
  const std::string http_address_;
};

}  // namespace gpupool
