// ApiKeyStore: the port through which the API keeps its API keys (docs/security.md, "API keys").
// Beside the Store port (scheduler/store.h) rather than in it: keys are not scheduling state, are
// read on every authenticated request from any thread, and must not queue behind the core's
// group commits. store/pg_api_keys.h implements it on PostgreSQL.
//
// A key is stored by id with the SHA-256 of its secret, never the secret. A revoked key stays
// (revoke_ms > 0) so that lists and audits can still name it.
//
// Errors: UNAVAILABLE when the database cannot be reached; ALREADY_EXISTS from Create for a
// duplicate id; NOT_FOUND from Revoke for an unknown id.
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct ApiKeyRecord {
  std::string id;             // 12 hex digits, public
  std::string name;           // what the creator called it
  std::string tenant;         // scope: a tenant path; empty = the whole tree (admin keys)
  std::string role;           // "viewer", "member", "tenant-admin" or "admin"
  std::string secret_sha256;  // lowercase hex
  std::string created_by;     // the creator's key id ("token:…", "key:…")
  int64_t create_ms = 0;
  int64_t expire_ms = 0;  // 0 = never
  int64_t revoke_ms = 0;  // 0 = not revoked
};

class ApiKeyStore {
 public:
  virtual ~ApiKeyStore() = default;
  virtual Status Create(const ApiKeyRecord& key) = 0;
  // nullopt when no key has this id.
  virtual Result<std::optional<ApiKeyRecord>> Get(const std::string& id) = 0;
  // Keys whose tenant is `tenant_prefix` or below it ("" = all), oldest first.
  virtual Result<std::vector<ApiKeyRecord>> List(const std::string& tenant_prefix) = 0;
  // Marks the key revoked at `now_ms` (a second revocation keeps the first time).
  virtual Result<ApiKeyRecord> Revoke(const std::string& id, int64_t now_ms) = 0;
};

// What a daemon that caches verified keys must hear about changes made by any daemon sharing the
// database (store/pg_key_feed.h tells it; api/key_cache.h listens). Calls come from the feed's
// own thread.
class ApiKeyChangeListener {
 public:
  virtual ~ApiKeyChangeListener() = default;
  // The feed listens (again): changes before this may have been missed.
  virtual void OnFeedUp() = 0;
  // The feed lost its connection: changes from now on may be missed until OnFeedUp.
  virtual void OnFeedDown() = 0;
  // Key `id` changed (revoked, deleted); "" = any key may have.
  virtual void OnKeyChanged(const std::string& id) = 0;
};

}  // namespace gpupool
