// One contract, every strategy (parameterised over the registry): what any placement strategy
// must do whatever its preferences.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

class StrategyContract : public ::testing::TestWithParam<Strategy> {
 protected:
  Engine Make(uint64_t seed = 7) {
    PoolPolicy p;
    p.strategy = GetParam();
    p.tie_seed = seed;
    return Engine(p);
  }
};

TEST_P(StrategyContract, PlacesOnlyWhereItFits) {
  Engine e = Make();
  ASSERT_TRUE(e.AddNode(Node("tiny-cpu", 8, /*cpu=*/1000)).ok());
  ASSERT_TRUE(e.AddNode(Node("ok", 2)).ok());
  ASSERT_TRUE(e.AddNode(Node("no-gpu", 0)).ok());
  for (const Request& r : {Share(300, 4000), Whole(2, 4000), Whole(1, 4000)}) {
    Decision d = e.Place(r);
    ASSERT_TRUE(d.placed);
    EXPECT_EQ(d.allocation.node, "ok");
  }
}

TEST_P(StrategyContract, PlaceDoesNotMutateAndIsDeterministic) {
  Engine a = Make(), b = Make();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(a.AddNode(Node("n" + std::to_string(i), 4)).ok());
    ASSERT_TRUE(b.AddNode(Node("n" + std::to_string(i), 4)).ok());
  }
  const Request reqs[] = {Share(470), Share(810), Whole(2), Share(230), Whole(1)};
  for (const Request& r : reqs) {
    Decision d1 = a.Place(r);
    Decision d2 = b.Place(r);
    ASSERT_TRUE(d1.placed);
    if (GetParam() != Strategy::kRandom) {
      EXPECT_EQ(d1.allocation, d2.allocation);
      EXPECT_EQ(a.Place(r).allocation, d1.allocation);  // asking again changes nothing
    }
    ASSERT_TRUE(a.Commit(d1.allocation).ok());
    ASSERT_TRUE(b.Commit(d2.allocation).ok());
  }
}

TEST_P(StrategyContract, WholeGpusAreFullyFreeAndDistinct) {
  Engine e = Make();
  ASSERT_TRUE(e.AddNode(Node("a", 4)).ok());
  ASSERT_TRUE(e.Commit(e.Place(Share(500)).allocation).ok());
  Decision d = e.Place(Whole(3));
  ASSERT_TRUE(d.placed);
  ASSERT_EQ(d.allocation.grants.size(), 3u);
  auto cap = *e.NodeCapacityOf("a");
  for (const Grant& g : d.allocation.grants) {
    EXPECT_TRUE(g.exclusive);
    EXPECT_TRUE(cap.devices[static_cast<size_t>(g.device_index)].allocated.IsZero());
  }
  EXPECT_FALSE(e.Place(Whole(4)).placed);
}

TEST_P(StrategyContract, FillsThePoolExactlyThenRefuses) {
  Engine e = Make();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.AddNode(Node("n" + std::to_string(i), 2)).ok());
  // 6 GPUs × 1000 milli: twelve half shares fit, the thirteenth does not.
  for (int i = 0; i < 12; ++i) {
    Decision d = e.Place(Share(500));
    ASSERT_TRUE(d.placed) << i;
    ASSERT_TRUE(e.Commit(d.allocation).ok());
  }
  EXPECT_FALSE(e.Place(Share(500)).placed);
}

TEST_P(StrategyContract, CpuOnlyTasksNeedNoDevice) {
  Engine e = Make();
  ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
  Request r;
  r.kind = RequestKind::kCpuOnly;
  r.cpu_milli = 2000;
  Decision d = e.Place(r);
  ASSERT_TRUE(d.placed);
  EXPECT_TRUE(d.allocation.grants.empty());
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, StrategyContract, ::testing::ValuesIn(AllStrategies()),
                         testing::StrategyTestName);

}  // namespace
}  // namespace gpupool::placement
