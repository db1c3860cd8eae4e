// fgd-pack's preferences through the public API: where the share-waste and stranded-GPU terms
// (strategies/fgd_pack.h) decide, with the arithmetic of each case written out.
#include <gtest/gtest.h>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

Engine Make(Strategy s) {
  PoolPolicy p;
  p.strategy = s;  // tie_seed 0: ties go to the node added first
  return Engine(p);
}

TEST(FgdPackTest, CompletesTypicalPatterns) {
  // Workload: 650s and 350s, equally often; first-fit decreasing pairs them, {650, 350}, so a
  // device with 350 or 650 free ends full (waste 0), and 700 free is on no pattern (waste 700).
  // Node a's GPU holds a 300 (700 free), node b's is fresh. A 350:
  //   on a: 700 → 350, Δwaste = 0 − 700 = −700; FGD's ΔF = ½ × 350 (the 650 class loses its
  //         fit) = 175, ΔH = ½ × (350 − 50) = 150;
  //   on b: 1000 → 650, Δwaste = 0 − 0 = 0; ΔF = 0, ΔH = ½ × (0 − 350) = −175.
  // fgd-pack: a costs 150 + 2 × 175 − 128 × 700 = −89,100, b −175 → a. FGD alone: int(100 ·
  // sigmoid(−0.175)) = 45 on a, 50 on b → b.
  for (auto [strategy, expect] : {std::pair{Strategy::kFgdPack, "a"}, {Strategy::kFgd, "b"}}) {
    Engine e = Make(strategy);
    e.SetWorkload({{Share(650), 1}, {Share(350), 1}});
    ASSERT_TRUE(e.AddNode(Node("a", 1)).ok());
    ASSERT_TRUE(e.Commit(e.Place(Share(300)).allocation).ok());
    ASSERT_TRUE(e.AddNode(Node("b", 1)).ok());
    const Decision d = e.Place(Share(350));
    ASSERT_TRUE(d.placed);
    EXPECT_EQ(d.allocation.node, expect) << StrategyName(strategy);
  }
}

TEST(FgdPackTest, KeepsCpuHeavySharesOffLeanNodes) {
  // Workload: whole GPUs and 470 shares, each with 12 cores: 0.5 × 1000 + 0.5 × 470 = 735
  // milli-GPU per 12000 milli-cores; × 1.4 = 0.08575. Node lean (2 GPUs, 16 cores) feeds
  // 0.08575 × 16000 = 1372 of its 2000 idle (628 stranded); a 470 with 12 cores there leaves 1530
  // idle and 4000 cores, which feed 343: 1187 stranded, Δ = +559. Node rich (104 cores) strands
  // nothing either way. The 470 goes to rich although lean was added first.
  Engine e = Make(Strategy::kFgdPack);
  e.SetWorkload({{Whole(1, 12000), 1}, {Share(470, 12000), 1}});
  ASSERT_TRUE(e.AddNode(Node("lean", 2, /*cpu=*/16000)).ok());
  ASSERT_TRUE(e.AddNode(Node("rich", 2, /*cpu=*/104000)).ok());
  const Decision d = e.Place(Share(470, 12000));
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.allocation.node, "rich");
}

}  // namespace
}  // namespace gpupool::placement
