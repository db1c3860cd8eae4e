// Property tests: seeded random Place/Commit/Release sequences, every strategy, with overcommit
// and a spill budget. After every step no device is promised more than it offers, spill stays
// within budget and matches Σ max(0, allocated − physical VRAM); releasing everything restores
// every counter exactly.
#include <gtest/gtest.h>

#include <random>

#include "placement/placement.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

void CheckInvariants(const Engine& e) {
  for (const NodeCapacity& n : e.Capacity()) {
    ASSERT_LE(n.cpu_allocated, n.cpu_milli) << n.name;
    ASSERT_LE(n.memory_allocated, n.memory_mib) << n.name;
    int64_t spill = 0;
    for (const DeviceCapacity& d : n.devices) {
      ASSERT_TRUE(d.offered.Fits(d.allocated)) << n.name << "/" << d.id;
      ASSERT_TRUE(d.allocated.IsNonNegative()) << n.name << "/" << d.id;
      ASSERT_LE(d.slots_used, d.slots_total);
      spill += std::max<int64_t>(0, d.allocated.vram_mib - d.physical.vram_mib);
    }
    ASSERT_EQ(spill, n.spill_used_mib) << n.name;
    ASSERT_LE(n.spill_used_mib, n.spill_budget_mib) << n.name;
  }
}

Request RandomRequest(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0:
      return testing::Share(static_cast<int32_t>(50 + rng() % 950), 500 + rng() % 8000,
                            rng() % 30000);
    case 1:
      return testing::Whole(static_cast<int>(1 + rng() % 4), 1000 + rng() % 16000, rng() % 60000);
    case 2:
      return testing::Amount(static_cast<int64_t>(1000 + rng() % 60000),
                             static_cast<int64_t>(1024 + rng() % 50000));
    case 3: {
      Request r;
      r.kind = RequestKind::kCpuOnly;
      r.cpu_milli = static_cast<int64_t>(rng() % 8000);
      return r;
    }
    default:
      return testing::Share(static_cast<int32_t>(100 + rng() % 400));
  }
}

class PropertyTest : public ::testing::TestWithParam<Strategy> {};

TEST_P(PropertyTest, NeverOverpromisesAndReleaseRestores) {
  for (uint64_t seed : {1, 2, 3}) {
    PoolPolicy p;
    p.strategy = GetParam();
    p.tie_seed = seed;
    p.compute = Ratio{1500};  // 1.5× compute
    p.memory = Ratio{1250};   // 1.25× VRAM, backed by host RAM
    Engine e(p);
    for (int i = 0; i < 12; ++i) {
      NodeSpec n =
          testing::Node("n" + std::to_string(i), 1 + i % 8, 32000 + 8000 * (i % 4), 262144);
      n.spill_budget_mib = (i % 3) * 16384;  // some nodes cannot spill at all
      ASSERT_TRUE(e.AddNode(n).ok());
    }
    const std::vector<NodeCapacity> empty = e.Capacity();
    std::mt19937_64 rng(seed);
    std::vector<Allocation> live;
    for (int step = 0; step < 600; ++step) {
      if (!live.empty() && rng() % 3 == 0) {
        const size_t k = rng() % live.size();
        ASSERT_TRUE(e.Release(live[k]).ok());
        live.erase(live.begin() + static_cast<long>(k));
      } else {
        Decision d = e.Place(RandomRequest(rng));
        if (d.placed) {
          ASSERT_TRUE(e.Commit(d.allocation).ok()) << "step " << step;
          live.push_back(d.allocation);
        }
      }
      CheckInvariants(e);
    }
    while (!live.empty()) {
      ASSERT_TRUE(e.Release(live.back()).ok());
      live.pop_back();
    }
    const std::vector<NodeCapacity> after = e.Capacity();
    ASSERT_EQ(after.size(), empty.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].cpu_allocated, 0);
      EXPECT_EQ(after[i].memory_allocated, 0);
      EXPECT_EQ(after[i].spill_used_mib, 0);
      for (const DeviceCapacity& d : after[i].devices) {
        EXPECT_TRUE(d.allocated.IsZero());
        EXPECT_EQ(d.slots_used, 0);
        EXPECT_FALSE(d.exclusive_taken);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, PropertyTest, ::testing::ValuesIn(AllStrategies()),
                         testing::StrategyTestName);

}  // namespace
}  // namespace gpupool::placement
