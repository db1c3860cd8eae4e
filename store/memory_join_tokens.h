// MemoryJoinTokens: the JoinTokenStore port (scheduler/join_tokens.h) in memory, for tests that
// need no database. It passes the same conformance suite as PgJoinTokens
// (tests/store/join_token_conformance.cc); Share() gives another handle on one table, the way
// replicas share one database.
//
// Thread safety: every method may be called from any thread (one mutex per table).
#pragma once

#include <map>
#include <memory>

#include "base/mutex.h"
#include "scheduler/join_tokens.h"

namespace gpupool {

class MemoryJoinTokens final : public JoinTokenStore {
 public:
  MemoryJoinTokens();
  std::unique_ptr<MemoryJoinTokens> Share() const;

  Status Create(const JoinTokenRecord& t) override;
  Result<std::optional<JoinTokenRecord>> Get(const std::string& id) override;
  Result<std::vector<JoinTokenRecord>> List() override;
  Status Revoke(const std::string& id, int64_t now_ms) override;
  Status Use(const std::string& id, const std::string& node, int64_t now_ms) override;

 private:
  struct Table {
    Mutex mu;
    std::map<std::string, JoinTokenRecord> rows GPUPOOL_GUARDED_BY(mu);
  };
  explicit MemoryJoinTokens(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  std::shared_ptr<Table> table_;
};

}  // namespace gpupool
