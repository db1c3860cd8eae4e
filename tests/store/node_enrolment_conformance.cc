// The NodeEnrolmentStore conformance suite (scheduler/node_enrolments.h), run against the memory
// implementation and against PostgreSQL: rows round-trip; Bind is a compare-and-set (a Join
// needs no live binding, a Renew the live serial) and a refused Bind changes nothing; Revoke
// keeps the row and frees the name for a Join; Import adds only unknown nodes; a second handle
// (another replica) sees every change at once; racing Joins for one name leave one winner.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "store/memory_node_enrolments.h"
#include "store/pg_node_enrolments.h"
#include "store/pg_store.h"
#include "tests/store/port_harness.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

using Factory = PortFactory<NodeEnrolmentStore>;

class NodeEnrolmentConformanceTest : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    ASSERT_OK(harness_->NewTable());
    store_ = OpenStore();
  }
  std::unique_ptr<NodeEnrolmentStore> OpenStore() {
    Result<std::unique_ptr<NodeEnrolmentStore>> s = harness_->Open();
    EXPECT_OK(s.status());
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::optional<NodeEnrolment> Row(const std::string& node) {
    Result<std::optional<NodeEnrolment>> r = store_->Get(node);
    EXPECT_OK(r.status());
    return r.ok() ? *r : std::nullopt;
  }

  std::unique_ptr<PortHarness<NodeEnrolmentStore>> harness_;
  std::unique_ptr<NodeEnrolmentStore> store_;
};

TEST_P(NodeEnrolmentConformanceTest, JoinRenewRevokeAreCompareAndSet) {
  EXPECT_EQ(Row("node-a"), std::nullopt);
  ASSERT_OK(store_->Bind({"node-a", "0a1b", 1'700'000'000, false}, ""));
  EXPECT_EQ(Row("node-a"), (NodeEnrolment{"node-a", "0a1b", 1'700'000'000, false}));
  // A second Join for a live name, a Renew with a stale or unknown serial: refused, no change.
  EXPECT_EQ(store_->Bind({"node-a", "ffff", 1, false}, "").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Bind({"node-a", "ffff", 1, false}, "9999").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Bind({"node-b", "ffff", 1, false}, "0a1b").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Row("node-a")->serial_hex, "0a1b");
  EXPECT_EQ(Row("node-b"), std::nullopt);
  // Renew with the live serial.
  ASSERT_OK(store_->Bind({"node-a", "0c2d", 1'800'000'000, false}, "0a1b"));
  EXPECT_EQ(Row("node-a"), (NodeEnrolment{"node-a", "0c2d", 1'800'000'000, false}));

  // Revoke keeps the row (twice is fine); a revoked node cannot renew but may join again.
  ASSERT_OK(store_->Revoke("node-a"));
  ASSERT_OK(store_->Revoke("node-a"));
  EXPECT_EQ(Row("node-a"), (NodeEnrolment{"node-a", "0c2d", 1'800'000'000, true}));
  EXPECT_EQ(store_->Bind({"node-a", "0e3f", 1, false}, "0c2d").code(),
            StatusCode::kFailedPrecondition);
  ASSERT_OK(store_->Bind({"node-a", "0e3f", 1'900'000'000, false}, ""));
  EXPECT_EQ(Row("node-a"), (NodeEnrolment{"node-a", "0e3f", 1'900'000'000, false}));
  EXPECT_EQ(store_->Revoke("never").code(), StatusCode::kNotFound);

  // Bad rows are refused before anything is written.
  EXPECT_EQ(store_->Bind({"", "01", 1, false}, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Bind({"node-c", "", 1, false}, "").code(), StatusCode::kInvalidArgument);
}

TEST_P(NodeEnrolmentConformanceTest, AnotherReplicaSeesEveryChangeAtOnce) {
  std::unique_ptr<NodeEnrolmentStore> other = OpenStore();
  ASSERT_OK(store_->Bind({"node-a", "0a", 100, false}, ""));
  ASSERT_OK_AND_ASSIGN(std::optional<NodeEnrolment> seen, other->Get("node-a"));
  EXPECT_EQ(seen, (NodeEnrolment{"node-a", "0a", 100, false}));
  ASSERT_OK(other->Revoke("node-a"));
  EXPECT_TRUE(Row("node-a")->revoked);
}

TEST_P(NodeEnrolmentConformanceTest, ImportAddsOnlyUnknownNodes) {
  ASSERT_OK(store_->Bind({"node-a", "0a", 100, false}, ""));
  ASSERT_OK_AND_ASSIGN(int added, store_->Import({{"node-a", "ff", 1, true},
                                                  {"node-b", "0b", 200, true},
                                                  {"node-c", "0c", 300, false}}));
  EXPECT_EQ(added, 2);
  EXPECT_EQ(Row("node-a"), (NodeEnrolment{"node-a", "0a", 100, false}));
  EXPECT_EQ(Row("node-b"), (NodeEnrolment{"node-b", "0b", 200, true}));
  EXPECT_EQ(Row("node-c"), (NodeEnrolment{"node-c", "0c", 300, false}));
  ASSERT_OK_AND_ASSIGN(added, store_->Import({{"node-c", "0c", 300, false}}));
  EXPECT_EQ(added, 0);
  EXPECT_EQ(store_->Import({{"node-d", "", 1, false}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Row("node-d"), std::nullopt);
}

TEST_P(NodeEnrolmentConformanceTest, RacingJoinsForOneNameLeaveOneWinner) {
  constexpr int kReplicas = 4;
  std::vector<std::unique_ptr<NodeEnrolmentStore>> handles;
  for (int i = 0; i < kReplicas; ++i) handles.push_back(OpenStore());
  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      const Status s = handles[static_cast<size_t>(i)]->Bind(
          {"node-a", "0" + std::to_string(i), 100, false}, "");
      (s.ok() ? won : refused) += 1;
      EXPECT_TRUE(s.ok() || s.code() == StatusCode::kFailedPrecondition) << s.ToString();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), kReplicas - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Stores, NodeEnrolmentConformanceTest,
    ::testing::Values(MemoryPort<NodeEnrolmentStore, MemoryNodeEnrolments>("memory"),
                      PgPort<NodeEnrolmentStore, PgNodeEnrolments>("pg")),
    PortName<NodeEnrolmentStore>);

}  // namespace
}  // namespace gpupool::testing
