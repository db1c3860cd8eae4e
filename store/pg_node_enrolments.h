// PgNodeEnrolments: the NodeEnrolmentStore port (scheduler/node_enrolments.h) on PostgreSQL,
// table `node_enrolments` (migration 14). Every replica sharing the database reads the same
// rows, so a node enrolled through one replica registers with another after a failover, and a
// revocation made on one is refused by the other at the node's next Register or Renew — there
// is no cache to invalidate (why: docs/ha.md, "Secure replicas").
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h): a
// lookup never waits behind the core's writes. Bind is one conditional statement, so two
// replicas (or two calls) racing for one node leave exactly one winner.
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>

#include "base/mutex.h"
#include "scheduler/node_enrolments.h"

namespace gpupool {

class PgConnection;

class PgNodeEnrolments final : public NodeEnrolmentStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open's
  // migrations.
  static Result<std::unique_ptr<PgNodeEnrolments>> Open(const std::string& uri);
  ~PgNodeEnrolments() override;

  Result<std::optional<NodeEnrolment>> Get(const std::string& node) override;
  Status Bind(const NodeEnrolment& e, const std::string& expected_serial) override;
  Status Revoke(const std::string& node) override;
  Result<int> Import(const std::vector<NodeEnrolment>& rows) override;

 private:
  explicit PgNodeEnrolments(std::unique_ptr<PgConnection> conn);

  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
