#include "api/key_cache.h"

namespace gpupool::api {

KeyCache::KeyCache(KeyLookup lookup, KeyCacheOptions options)
    : lookup_(std::move(lookup)), options_(options) {}

Result<std::optional<StoredKey>> KeyCache::Lookup(const std::string& id) {
  uint64_t generation = 0;
  {
    MutexLock lock(&mu_);
    if (live_) {
      auto it = entries_.find(id);
      if (it != entries_.end() && Clock::now() < it->second.until) {
        ++hits_;
        return std::optional<StoredKey>(it->second.key);
      }
    }
    ++misses_;
    generation = generation_;
  }
  Result<std::optional<StoredKey>> found = lookup_(id);
  if (found.ok() && found->has_value()) {
    MutexLock lock(&mu_);
    if (live_ && generation == generation_) {
      if (entries_.size() >= options_.max_entries) entries_.clear();
      entries_[id] = Entry{**found, Clock::now() + options_.max_age};
    }
  }
  return found;
}

KeyLookup KeyCache::AsLookup() {
  return [this](const std::string& id) { return Lookup(id); };
}

void KeyCache::OnFeedUp() {
  MutexLock lock(&mu_);
  entries_.clear();
  ++generation_;
  live_ = true;
}

void KeyCache::OnFeedDown() {
  MutexLock lock(&mu_);
  entries_.clear();
  ++generation_;
  live_ = false;
}

void KeyCache::OnKeyChanged(const std::string& id) {
  MutexLock lock(&mu_);
  if (id.empty()) {
    entries_.clear();
  } else {
    entries_.erase(id);
  }
  ++generation_;
}

uint64_t KeyCache::hits() const {
  MutexLock lock(&mu_);
  return hits_;
}

uint64_t KeyCache::misses() const {
  MutexLock lock(&mu_);
  return misses_;
}

Result<ApiKeyRecord> CacheInvalidatingKeyStore::Revoke(const std::string& id, int64_t now_ms) {
  Result<ApiKeyRecord> r = inner_->Revoke(id, now_ms);
  cache_->OnKeyChanged(id);  // whatever the outcome: a failed commit may still have landed
  return r;
}

}  // namespace gpupool::api
