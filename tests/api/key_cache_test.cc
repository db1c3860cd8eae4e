// KeyCache on real PostgreSQL: verified keys come from memory while the change feed
// (PgKeyChangeFeed, migration 11's trigger) is live, and a revocation made by another daemon
// (here: a second PgApiKeyStore on the same database) or by this one is seen at once.
#include "api/key_cache.h"

#include <gtest/gtest.h>

#include <atomic>

#include "store/pg_api_keys.h"
#include "store/pg_key_feed.h"
#include "store/pg_store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/wait_for.h"

namespace gpupool::api {
namespace {

using testing::WaitFor;

// Records what the feed says before passing it on to the cache.
class CountingListener final : public ApiKeyChangeListener {
 public:
  explicit CountingListener(KeyCache* cache) : cache_(cache) {}
  void OnFeedUp() override {
    cache_->OnFeedUp();
    ++up;
  }
  void OnFeedDown() override { cache_->OnFeedDown(); }
  void OnKeyChanged(const std::string& id) override {
    cache_->OnKeyChanged(id);
    ++changes;
  }
  std::atomic<int> up{0};
  std::atomic<int> changes{0};

 private:
  KeyCache* cache_;
};

KeyLookup LookupIn(ApiKeyStore* keys) {
  return [keys](const std::string& id) -> Result<std::optional<StoredKey>> {
    GPUPOOL_ASSIGN_OR_RETURN(std::optional<ApiKeyRecord> k, keys->Get(id));
    if (!k) return std::optional<StoredKey>();
    return std::optional<StoredKey>(
        StoredKey{k->tenant, Role::kMember, k->secret_sha256, k->expire_ms, k->revoke_ms});
  };
}

ApiKeyRecord Key(const std::string& id) {
  return {.id = id,
          .name = "k",
          .tenant = "acme",
          .role = "member",
          .secret_sha256 = std::string(64, 'a'),
          .created_by = "token:ops",
          .create_ms = 1};
}

class KeyCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(uri_, testing::CreateTestDatabase());
    PgStoreOptions o;
    o.uri = uri_;
    ASSERT_OK_AND_ASSIGN(store_, PgStore::Open(o));  // applies the migrations
    ASSERT_OK_AND_ASSIGN(mine_, PgApiKeyStore::Open(uri_));
    ASSERT_OK_AND_ASSIGN(other_daemon_, PgApiKeyStore::Open(uri_));
    cache_ = std::make_unique<KeyCache>(LookupIn(mine_.get()));
    listener_ = std::make_unique<CountingListener>(cache_.get());
  }
  void StartFeed() {
    ASSERT_OK_AND_ASSIGN(feed_, PgKeyChangeFeed::Start(uri_, listener_.get()));
    ASSERT_TRUE(WaitFor([&] { return listener_->up.load() > 0; }, std::chrono::seconds(30)));
  }
  void TearDown() override { feed_.reset(); }

  std::string uri_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<PgApiKeyStore> mine_, other_daemon_;
  std::unique_ptr<KeyCache> cache_;
  std::unique_ptr<CountingListener> listener_;
  std::unique_ptr<PgKeyChangeFeed> feed_;
};

TEST_F(KeyCacheTest, WithoutALiveFeedEveryLookupAsksTheDatabase) {
  ASSERT_OK(mine_->Create(Key("aaaaaaaaaaaa")));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto k, cache_->Lookup("aaaaaaaaaaaa"));
    ASSERT_TRUE(k.has_value());
  }
  EXPECT_EQ(cache_->hits(), 0u);
  EXPECT_EQ(cache_->misses(), 3u);
}

TEST_F(KeyCacheTest, ARevocationByAnotherDaemonIsSeenAtOnce) {
  StartFeed();
  ASSERT_OK(mine_->Create(Key("bbbbbbbbbbbb")));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto k, cache_->Lookup("bbbbbbbbbbbb"));
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->revoke_ms, 0);
  }
  EXPECT_EQ(cache_->misses(), 1u);  // then from memory
  EXPECT_EQ(cache_->hits(), 2u);

  ASSERT_OK(other_daemon_->Revoke("bbbbbbbbbbbb", 1000).status());
  // Delivered when the revoking transaction commits; the cache forgets the key then.
  ASSERT_TRUE(WaitFor([&] { return listener_->changes.load() > 0; }, std::chrono::seconds(30)));
  ASSERT_OK_AND_ASSIGN(auto k, cache_->Lookup("bbbbbbbbbbbb"));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k.value().revoke_ms, int64_t{1000});
}

TEST_F(KeyCacheTest, ARevocationThroughThisDaemonCountsBeforeItReturns) {
  StartFeed();
  ASSERT_OK(mine_->Create(Key("cccccccccccc")));
  ASSERT_OK(cache_->Lookup("cccccccccccc").status());
  ASSERT_OK(cache_->Lookup("cccccccccccc").status());
  EXPECT_EQ(cache_->hits(), 1u);
  CacheInvalidatingKeyStore through(mine_.get(), cache_.get());
  ASSERT_OK(through.Revoke("cccccccccccc", 2000).status());
  // No waiting for the feed.
  ASSERT_OK_AND_ASSIGN(auto k, cache_->Lookup("cccccccccccc"));
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k.value().revoke_ms, int64_t{2000});
}

TEST_F(KeyCacheTest, UnknownKeysAreNeverCachedAndAFeedOutageEmptiesTheCache) {
  StartFeed();
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto k, cache_->Lookup("dddddddddddd"));
    EXPECT_FALSE(k.has_value());
  }
  EXPECT_EQ(cache_->hits(), 0u);
  ASSERT_OK(mine_->Create(Key("eeeeeeeeeeee")));
  ASSERT_OK(cache_->Lookup("eeeeeeeeeeee").status());
  cache_->OnFeedDown();  // changes may be missed from now on: nothing is trusted
  ASSERT_OK(cache_->Lookup("eeeeeeeeeeee").status());
  ASSERT_OK(cache_->Lookup("eeeeeeeeeeee").status());
  EXPECT_EQ(cache_->hits(), 0u);
}

}  // namespace
}  // namespace gpupool::api
