// The JoinTokenStore conformance suite (scheduler/join_tokens.h), against the memory
// implementation and PostgreSQL: rows round-trip; Use counts a use only while the token is live,
// unexpired and has uses left, and says why when not; Revoke keeps the first revocation time; a
// second handle (another replica) sees every change at once; racing uses of a token's last use
// leave one winner.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "store/memory_join_tokens.h"
#include "store/pg_join_tokens.h"
#include "store/pg_store.h"
#include "tests/store/port_harness.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

using Factory = PortFactory<JoinTokenStore>;

JoinTokenRecord Token(const std::string& id, int64_t max_uses = 0, int64_t expire_ms = 0) {
  JoinTokenRecord t;
  t.id = id;
  t.secret_sha256 = std::string(64, 'a');
  t.note = "rack 12 — refresh";
  t.created_by = "admin-token";
  t.create_ms = 1'000;
  t.expire_ms = expire_ms;
  t.max_uses = max_uses;
  return t;
}

class JoinTokenConformanceTest : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    ASSERT_OK(harness_->NewTable());
    store_ = OpenStore();
  }
  std::unique_ptr<JoinTokenStore> OpenStore() {
    Result<std::unique_ptr<JoinTokenStore>> s = harness_->Open();
    EXPECT_OK(s.status());
    return s.ok() ? std::move(s).value() : nullptr;
  }
  JoinTokenRecord Row(const std::string& id) {
    Result<std::optional<JoinTokenRecord>> r = store_->Get(id);
    EXPECT_OK(r.status());
    return r.ok() && r->has_value() ? **r : JoinTokenRecord{};
  }

  std::unique_ptr<PortHarness<JoinTokenStore>> harness_;
  std::unique_ptr<JoinTokenStore> store_;
};

TEST_P(JoinTokenConformanceTest, RowsRoundTripAndIdsAreUnique) {
  ASSERT_OK(store_->Create(Token("0123456789ab", 3, 9'000)));
  EXPECT_EQ(Row("0123456789ab"), Token("0123456789ab", 3, 9'000));
  EXPECT_EQ(store_->Create(Token("0123456789ab")).code(), StatusCode::kAlreadyExists);
  ASSERT_OK_AND_ASSIGN(std::optional<JoinTokenRecord> none, store_->Get("ffffffffffff"));
  EXPECT_FALSE(none.has_value());
  JoinTokenRecord later = Token("bbbbbbbbbbbb");
  later.create_ms = 2'000;
  ASSERT_OK(store_->Create(later));
  ASSERT_OK_AND_ASSIGN(std::vector<JoinTokenRecord> all, store_->List());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "0123456789ab");
  EXPECT_EQ(all[1].id, "bbbbbbbbbbbb");
  // Bad records are refused before anything is written.
  EXPECT_EQ(store_->Create(Token("xyz")).code(), StatusCode::kInvalidArgument);
  JoinTokenRecord bad = Token("cccccccccccc");
  bad.secret_sha256 = "plaintext-secret";
  EXPECT_EQ(store_->Create(bad).code(), StatusCode::kInvalidArgument);
}

TEST_P(JoinTokenConformanceTest, UseCountsOnlyWhileLiveUnexpiredAndWithUsesLeft) {
  ASSERT_OK(store_->Create(Token("aaaaaaaaaaaa", 2, 10'000)));
  ASSERT_OK(store_->Use("aaaaaaaaaaaa", "node-1", 5'000));
  ASSERT_OK(store_->Use("aaaaaaaaaaaa", "node-2", 6'000));
  Status used_up = store_->Use("aaaaaaaaaaaa", "node-3", 7'000);
  EXPECT_EQ(used_up.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(used_up.message().find("used 2 of 2 times"), std::string::npos) << used_up.ToString();
  JoinTokenRecord r = Row("aaaaaaaaaaaa");
  EXPECT_EQ(r.uses, 2);
  EXPECT_EQ(r.last_node, "node-2");
  EXPECT_EQ(r.last_use_ms, 6'000);

  ASSERT_OK(store_->Create(Token("eeeeeeeeeeee", 0, 10'000)));
  Status expired = store_->Use("eeeeeeeeeeee", "node-1", 10'000);
  EXPECT_EQ(expired.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(expired.message().find("expired at 1970-01-01T00:00:10Z"), std::string::npos)
      << expired.ToString();
  EXPECT_EQ(Row("eeeeeeeeeeee").uses, 0);

  ASSERT_OK(store_->Create(Token("dddddddddddd")));
  ASSERT_OK(store_->Revoke("dddddddddddd", 3'000));
  ASSERT_OK(store_->Revoke("dddddddddddd", 4'000));
  EXPECT_EQ(Row("dddddddddddd").revoke_ms, 3'000);
  Status revoked = store_->Use("dddddddddddd", "node-1", 5'000);
  EXPECT_EQ(revoked.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(revoked.message().find("was revoked"), std::string::npos);
  EXPECT_EQ(store_->Use("ffffffffffff", "n", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Revoke("ffffffffffff", 1).code(), StatusCode::kNotFound);
}

TEST_P(JoinTokenConformanceTest, AnotherReplicaSeesUsesAndRevocationsAtOnce) {
  std::unique_ptr<JoinTokenStore> other = OpenStore();
  ASSERT_OK(store_->Create(Token("aaaaaaaaaaaa", 1)));
  ASSERT_OK(other->Use("aaaaaaaaaaaa", "node-1", 2'000));
  EXPECT_EQ(store_->Use("aaaaaaaaaaaa", "node-2", 3'000).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store_->Create(Token("bbbbbbbbbbbb")));
  ASSERT_OK(store_->Revoke("bbbbbbbbbbbb", 2'000));
  EXPECT_EQ(other->Use("bbbbbbbbbbbb", "node-1", 3'000).code(), StatusCode::kFailedPrecondition);
}

TEST_P(JoinTokenConformanceTest, RacingUsesOfTheLastUseLeaveOneWinner) {
  ASSERT_OK(store_->Create(Token("aaaaaaaaaaaa", 1)));
  constexpr int kRacers = 6;
  std::vector<std::unique_ptr<JoinTokenStore>> handles;
  for (int i = 0; i < kRacers; ++i) handles.push_back(OpenStore());
  std::atomic<int> won{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      if (handles[i]->Use("aaaaaaaaaaaa", "node-" + std::to_string(i), 2'000).ok()) ++won;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(Row("aaaaaaaaaaaa").uses, 1);
}

INSTANTIATE_TEST_SUITE_P(All, JoinTokenConformanceTest,
                         ::testing::Values(MemoryPort<JoinTokenStore, MemoryJoinTokens>("memory"),
                                           PgPort<JoinTokenStore, PgJoinTokens>("pg")),
                         PortName<JoinTokenStore>);

}  // namespace
}  // namespace gpupool::testing
