// Tentative: commits and releases go to the engine at once and are undone in reverse order unless
// kept; the engine's counters come back exactly.
#include "placement/tentative.h"

#include <gtest/gtest.h>

#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

std::vector<NodeCapacity> Snapshot(const Engine& e) {
  std::vector<NodeCapacity> out;
  for (const char* n : {"a", "b"}) out.push_back(*e.NodeCapacityOf(n));
  return out;
}

bool Same(const std::vector<NodeCapacity>& x, const std::vector<NodeCapacity>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].cpu_allocated != y[i].cpu_allocated || x[i].memory_allocated != y[i].memory_allocated)
      return false;
    for (size_t d = 0; d < x[i].devices.size(); ++d) {
      if (x[i].devices[d].allocated != y[i].devices[d].allocated ||
          x[i].devices[d].slots_used != y[i].devices[d].slots_used ||
          x[i].devices[d].exclusive_taken != y[i].devices[d].exclusive_taken)
        return false;
    }
  }
  return true;
}

TEST(TentativeTest, RollsBackInReverseAndKeepsWhatIsKept) {
  Engine e{PoolPolicy{}};
  ASSERT_TRUE(e.AddNode(Node("a", 2)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 2)).ok());
  Allocation running = e.Place(Whole(2)).allocation;  // fills node a
  ASSERT_TRUE(e.Commit(running).ok());
  const auto before = Snapshot(e);

  {
    Tentative tx(e);
    // As if the running task were gone: its room is free for a 2-GPU placement on a.
    ASSERT_TRUE(tx.Release(running).ok());
    Decision d = e.Place(Whole(2));
    ASSERT_TRUE(d.placed);
    ASSERT_TRUE(tx.Commit(d.allocation).ok());
    ASSERT_TRUE(tx.Commit(e.Place(Share(500)).allocation).ok());
    EXPECT_EQ(tx.steps(), 3u);
    // A step that fails changes nothing and is not logged.
    EXPECT_FALSE(tx.Commit(Allocation{"nowhere", {}, 0, 0}).ok());
    EXPECT_EQ(tx.steps(), 3u);
    EXPECT_TRUE(tx.Rollback().ok());
    EXPECT_EQ(tx.steps(), 0u);
  }
  EXPECT_TRUE(Same(Snapshot(e), before));

  {
    Tentative tx(e);  // rolled back by the destructor
    ASSERT_TRUE(tx.Commit(e.Place(Share(250)).allocation).ok());
  }
  EXPECT_TRUE(Same(Snapshot(e), before));

  Allocation kept;
  {
    Tentative tx(e);
    kept = e.Place(Share(250)).allocation;
    ASSERT_TRUE(tx.Commit(kept).ok());
    {
      Tentative inner(e);  // nests: the inner try is undone, the outer kept
      ASSERT_TRUE(inner.Release(kept).ok());
    }
    tx.Keep();
  }
  EXPECT_FALSE(Same(Snapshot(e), before));
  ASSERT_TRUE(e.Release(kept).ok());
  EXPECT_TRUE(Same(Snapshot(e), before));
}

}  // namespace
}  // namespace gpupool::placement
