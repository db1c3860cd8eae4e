// ShareWaste (placement/share_patterns.h): the expected final waste of a device by its free
// share, from first-fit-decreasing patterns of the workload's share sizes. Each case's patterns
// and weighted means are worked out in its comment.
#include "placement/share_patterns.h"

#include <gtest/gtest.h>

#include <utility>

namespace gpupool::placement {
namespace {

std::vector<FragClass> Shares(std::vector<std::pair<int32_t, double>> sizes) {
  std::vector<FragClass> w;
  for (auto [milli, p] : sizes) {
    FragClass c;
    c.gpu_milli = milli;
    c.gpu_count = 1;
    c.p = p;
    w.push_back(c);
  }
  return w;
}

struct Case {
  const char* name;
  std::vector<FragClass> workload;
  std::vector<std::pair<int32_t, double>> expect;  // (free share, waste)
  int scale = 4000;
};

TEST(ShareWasteTest, Patterns) {
  FragClass whole;
  whole.gpu_milli = 1000;
  whole.gpu_count = 2;
  whole.p = 0.5;
  std::vector<FragClass> with_whole = Shares({{300, 0.5}});
  with_whole.push_back(whole);
  const std::vector<Case> cases = {
      // 500s pair up exactly: {500, 500}, waste 0. States 500 (one in) and 0 (both): 0. A free
      // share no pattern passes through keeps itself as waste: 300 → 300.
      {"halves", Shares({{500, 1}}), {{500, 0}, {0, 0}, {300, 300}, {1000, 0}}},
      // 600s open bins, 400s fill them: {400, 600}, waste 0; states 400 (600 in), 600 (400 in).
      {"complements", Shares({{600, 0.5}, {400, 0.5}}), {{400, 0}, {600, 0}, {500, 500}}},
      // Scale 4000: 3600 × 810, 400 × 160. The 160s fill the first 400 of the 3600 810-bins:
      // {160, 810} × 400 (waste 30) and {810} × 3200 (waste 190). Free 190 (an 810 in) is on
      // both: (400 × 30 + 3200 × 190) / 3600 = 172.2; free 840 (a 160 in) only on the first: 30.
      {"rare filler",
       Shares({{810, 0.9}, {160, 0.1}}),
       {{190, (400.0 * 30 + 3200.0 * 190) / 3600}, {840, 30}, {30, 30}}},
      // Scale 3000: 300s pack three to a device, 1000 × {300, 300, 300}, waste 100 at every
      // state: 700, 400, 100. Whole-GPU classes take no part.
      {"thirds", with_whole, {{700, 100}, {400, 100}, {100, 100}, {200, 200}}, 3000},
      // Scale 4000 leaves one 300 alone (4000 = 3 × 1333 + 1), waste 700, on state 700 only:
      // (1333 × 100 + 1 × 700) / 1334.
      {"thirds, one left", with_whole, {{700, (1333.0 * 100 + 700) / 1334}, {400, 100}}},
  };
  for (const Case& c : cases) {
    const std::vector<double> w = ShareWaste(c.workload, c.scale);
    ASSERT_EQ(w.size(), static_cast<size_t>(kShareStates)) << c.name;
    for (auto [free, waste] : c.expect)
      EXPECT_NEAR(w[static_cast<size_t>(free)], waste, 1e-9) << c.name << " free " << free;
  }
}

TEST(ShareWasteTest, NoShareClassesNoTable) {
  FragClass whole;
  whole.gpu_milli = 1000;
  whole.gpu_count = 1;
  whole.p = 1;
  EXPECT_TRUE(ShareWaste({whole}).empty());
  EXPECT_TRUE(ShareWaste({}).empty());
}

}  // namespace
}  // namespace gpupool::placement
