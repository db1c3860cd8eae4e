// One contract, every queue order (parameterised over the registry): what any policy that merges
// a priority level's fair-share queues must do whatever its preferences (scheduler/queue_order.h).
// Then each policy's own preference, with the expected order written out.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "scheduler/queue_order.h"

namespace gpupool {
namespace {

using Queues = std::vector<std::vector<TaskKey>>;

std::vector<TaskKey> Visit(const QueueOrder& order, const Queues& queues,
                           const QueueOrder::ShareFn& share, size_t stop_after = SIZE_MAX) {
  std::vector<TaskKey> out;
  order.Merge(queues, share, [&](const TaskKey& k) {
    out.push_back(k);
    return out.size() < stop_after;
  });
  return out;
}

QueueOrder::ShareFn Fixed(std::vector<double> shares) {
  return [shares](size_t q) { return QueueOrder::Share{shares.at(q), 0.0}; };
}

// Three tenants' queues, interleaved ages.
const Queues kThree = {
    {{1, 0}, {1, 1}, {4, 0}}, {{2, 0}, {5, 0}}, {{3, 0}, {3, 1}, {6, 0}, {7, 0}}};

class QueueOrderContract : public ::testing::TestWithParam<QueueOrderKind> {
 protected:
  std::unique_ptr<QueueOrder> order_ = MakeQueueOrder(GetParam());
};

TEST_P(QueueOrderContract, NameRoundTripsThroughTheRegistry) {
  EXPECT_EQ(order_->name(), QueueOrderName(GetParam()));
  Result<QueueOrderKind> parsed = ParseQueueOrder(order_->name());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, GetParam());
}

TEST_P(QueueOrderContract, VisitsEveryTaskExactlyOnce) {
  std::vector<TaskKey> seen = Visit(*order_, kThree, Fixed({0.5, 0.1, 0.9}));
  std::multiset<TaskKey> got(seen.begin(), seen.end()), want;
  for (const auto& q : kThree) want.insert(q.begin(), q.end());
  EXPECT_EQ(got, want);
}

TEST_P(QueueOrderContract, KeepsEachQueuesOwnOrder) {
  for (const auto& shares : {std::vector<double>{0, 0, 0}, {0.9, 0.1, 0.5}, {0.1, 0.9, 0.0}}) {
    std::vector<TaskKey> seen = Visit(*order_, kThree, Fixed(shares));
    for (const auto& q : kThree) {
      std::vector<TaskKey> sub;
      std::set<TaskKey> mine(q.begin(), q.end());
      for (const TaskKey& k : seen)
        if (mine.contains(k)) sub.push_back(k);
      EXPECT_EQ(sub, q);
    }
  }
}

TEST_P(QueueOrderContract, StopsWhenAsked) {
  EXPECT_EQ(Visit(*order_, kThree, Fixed({0, 0, 0}), 4).size(), 4u);
  EXPECT_EQ(Visit(*order_, kThree, Fixed({0, 0, 0}), 1).size(), 1u);
}

TEST_P(QueueOrderContract, NoQueuesNoVisits) { EXPECT_TRUE(Visit(*order_, {}, Fixed({})).empty()); }

TEST_P(QueueOrderContract, ReadsSharesOnlyOfQueuesItHas) {
  size_t calls = 0;
  auto share = [&](size_t q) {
    EXPECT_LT(q, kThree.size());
    ++calls;
    return QueueOrder::Share{0.0, 0.0};
  };
  std::vector<TaskKey> seen = Visit(*order_, kThree, share);
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_LE(calls, 3 * (seen.size() + kThree.size()));  // O(1) reads per visit
}

INSTANTIATE_TEST_SUITE_P(AllOrders, QueueOrderContract, ::testing::ValuesIn(AllQueueOrders()),
                         [](const ::testing::TestParamInfo<QueueOrderKind>& param_info) {
                           std::string n(QueueOrderName(param_info.param));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(QueueOrderRegistry, UnknownNameIsRefusedNamingTheKnownOnes) {
  Result<QueueOrderKind> r = ParseQueueOrder("lottery");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'lottery'"), std::string::npos);
  EXPECT_NE(r.status().message().find("fair-share, fifo"), std::string::npos);
}

TEST(FifoOrder, OldestFirstAcrossTenantsSharesIgnored) {
  std::vector<TaskKey> seen = Visit(*MakeFifoOrder(), kThree, Fixed({0.9, 0.0, 0.5}));
  std::vector<TaskKey> want = {{1, 0}, {1, 1}, {2, 0}, {3, 0}, {3, 1},
                               {4, 0}, {5, 0}, {6, 0}, {7, 0}};
  EXPECT_EQ(seen, want);
}

TEST(FairShareOrder, LowestShareFirstThenAge) {
  // Queue 1 is owed most (0.1), then queue 0 (0.5), then queue 2 (0.9); shares fixed, so each
  // queue drains in turn.
  std::vector<TaskKey> seen = Visit(*MakeFairShareOrder(), kThree, Fixed({0.5, 0.1, 0.9}));
  std::vector<TaskKey> want = {{2, 0}, {5, 0}, {1, 0}, {1, 1}, {4, 0},
                               {3, 0}, {3, 1}, {6, 0}, {7, 0}};
  EXPECT_EQ(seen, want);
}

TEST(FairShareOrder, ReReadsSharesAsTheyGrow) {
  // Each visit adds 0.3 to the visited queue's share: two tenants starting at 0.0 and 0.1
  // alternate (0.0 → a, 0.1 → b, 0.3 → a, 0.4 → b, …).
  std::map<size_t, double> share = {{0, 0.0}, {1, 0.1}};
  Queues two = {{{1, 0}, {1, 1}, {1, 2}}, {{2, 0}, {2, 1}, {2, 2}}};
  std::vector<TaskKey> seen;
  MakeFairShareOrder()->Merge(
      two,
      [&](size_t q) {
        return QueueOrder::Share{share[q], 0.0};
      },
      [&](const TaskKey& k) {
        seen.push_back(k);
        share[k.first == 1 ? 0 : 1] += 0.3;
        return true;
      });
  std::vector<TaskKey> want = {{1, 0}, {2, 0}, {1, 1}, {2, 1}, {1, 2}, {2, 2}};
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace gpupool
