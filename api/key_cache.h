// KeyCache: verified API keys kept in memory, so an authenticated call does not cost a database
// round trip (bench/submit_throughput: that lookup, on one connection shared by every call, was
// what made API-key calls slower than static-token ones). Revocation still counts at once on
// every daemon: the cache trusts itself only while a change feed is live (store/pg_key_feed.h
// calls it as an ApiKeyChangeListener), forgets a key as soon as the feed says it changed, and
// forgets everything whenever the feed goes down or comes back (changes in between were missed).
//
//   KeyCache cache(raw_lookup);                       // raw_lookup asks the database
//   Authenticator::Create(tokens, cache.AsLookup());  // answers from memory while live
//   PgKeyChangeFeed::Start(uri, &cache);
//
// What is cached is the stored record (its secret's SHA-256, scope, role, expiry, revocation):
// the Authenticator still hashes and compares the presented secret and checks expiry on every
// call. Unknown ids are never cached (an attacker's guesses would fill it). An entry lives at
// most `max_age`, a bound on any change the feed could miss without noticing; past `max_entries`
// the cache starts over.
//
// A lookup that races a change cannot put the old record back: every change bumps a generation,
// and a record read from the database is cached only if no change happened meanwhile.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "api/auth.h"
#include "base/mutex.h"
#include "scheduler/api_keys.h"

namespace gpupool::api {

struct KeyCacheOptions {
  std::chrono::milliseconds max_age{30'000};
  size_t max_entries = 100'000;
};

class KeyCache final : public ApiKeyChangeListener {
 public:
  explicit KeyCache(KeyLookup lookup, KeyCacheOptions options = {});

  // The record for `id`: from memory while the feed is live and the entry is fresh, else from
  // the wrapped lookup (and remembered when found).
  Result<std::optional<StoredKey>> Lookup(const std::string& id);
  // Lookup as a KeyLookup for Authenticator::Create. The cache must outlive it.
  KeyLookup AsLookup();

  // ApiKeyChangeListener.
  void OnFeedUp() override;
  void OnFeedDown() override;
  void OnKeyChanged(const std::string& id) override;

  // Lookups answered from memory, and sent to the database (for tests and the benchmark page).
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    StoredKey key;
    Clock::time_point until;
  };

  const KeyLookup lookup_;
  const KeyCacheOptions options_;
  mutable Mutex mu_;
  bool live_ GPUPOOL_GUARDED_BY(mu_) = false;
  uint64_t generation_ GPUPOOL_GUARDED_BY(mu_) = 0;
  std::unordered_map<std::string, Entry> entries_ GPUPOOL_GUARDED_BY(mu_);
  uint64_t hits_ GPUPOOL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ GPUPOOL_GUARDED_BY(mu_) = 0;
};

// An ApiKeyStore that tells a KeyCache about revocations made through it before it returns, so
// the daemon that revoked a key refuses it from the very next call (other daemons hear it from
// the feed). Everything else is passed through.
class CacheInvalidatingKeyStore final : public ApiKeyStore {
 public:
  CacheInvalidatingKeyStore(ApiKeyStore* inner, KeyCache* cache) : inner_(inner), cache_(cache) {}
  Status Create(const ApiKeyRecord& key) override { return inner_->Create(key); }
  Result<std::optional<ApiKeyRecord>> Get(const std::string& id) override {
    return inner_->Get(id);
  }
  Result<std::vector<ApiKeyRecord>> List(const std::string& tenant_prefix) override {
    return inner_->List(tenant_prefix);
  }
  Result<ApiKeyRecord> Revoke(const std::string& id, int64_t now_ms) override;

 private:
  ApiKeyStore* const inner_;
  KeyCache* const cache_;
};

}  // namespace gpupool::api
