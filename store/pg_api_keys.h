// PgApiKeyStore: the ApiKeyStore port (scheduler/api_keys.h) on PostgreSQL, table `api_keys`
// (migration 10). One connection of its own, guarded by a mutex, reconnecting with backoff like
// the store's (store/pg_conn.h): a lookup never waits behind the core's writes. No cache — a
// revocation is seen by the next request on every daemon that shares the database.
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "scheduler/api_keys.h"

namespace gpupool {

class PgConnection;

class PgApiKeyStore final : public ApiKeyStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open's
  // migrations.
  static Result<std::unique_ptr<PgApiKeyStore>> Open(const std::string& uri);
  ~PgApiKeyStore() override;

  Status Create(const ApiKeyRecord& key) override;
  Result<std::optional<ApiKeyRecord>> Get(const std::string& id) override;
  Result<std::vector<ApiKeyRecord>> List(const std::string& tenant_prefix) override;
  Result<ApiKeyRecord> Revoke(const std::string& id, int64_t now_ms) override;

 private:
  explicit PgApiKeyStore(std::unique_ptr<PgConnection> conn);

  std::mutex mu_;
  std::unique_ptr<PgConnection> conn_;  // guarded by mu_
};

}  // namespace gpupool
