// PgJoinTokens: the JoinTokenStore port (scheduler/join_tokens.h) on PostgreSQL, table
// `join_tokens` (migration 16). Every replica reads the same rows: a token revoked or used up
// through one replica is refused by the others at once, with no cache to invalidate. Use is one
// conditional UPDATE, so joins racing for a token's last use leave one winner.
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h).
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>

#include "base/mutex.h"
#include "scheduler/join_tokens.h"

namespace gpupool {

class PgConnection;

class PgJoinTokens final : public JoinTokenStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open.
  static Result<std::unique_ptr<PgJoinTokens>> Open(const std::string& uri);
  ~PgJoinTokens() override;

  Status Create(const JoinTokenRecord& t) override;
  Result<std::optional<JoinTokenRecord>> Get(const std::string& id) override;
  Result<std::vector<JoinTokenRecord>> List() override;
  Status Revoke(const std::string& id, int64_t now_ms) override;
  Status Use(const std::string& id, const std::string& node, int64_t now_ms) override;

 private:
  explicit PgJoinTokens(std::unique_ptr<PgConnection> conn);

  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
