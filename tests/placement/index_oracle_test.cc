// The cached, indexed selection must pick exactly what a full scan would: after seeded random
// commits and releases, for every strategy (but random) and many request shapes, Select's node
// has the best score among all feasible nodes and, among equals, the smallest tie key — also
// right after workload changes. And the score index's bounded refresh of stale scores.
#include <gtest/gtest.h>

#include <random>

#include "placement/accounting.h"
#include "placement/engine_impl.h"
#include "placement/score_index.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

int64_t FloorPow2(int64_t v) {
  int64_t p = 1;
  while (p <= v / 2) p *= 2;
  return v <= 0 ? 0 : p;
}

// The full scan: every node, filter + score, best score then smallest tie key.
int Oracle(const EngineImpl& e, const CompiledRequest& req, int64_t* score) {
  CompiledRequest shape = req;
  shape.memory_mib = FloorPow2(req.memory_mib);  // scores see memory rounded, as the engine does
  int best = -1;
  for (const NodeState& n : e.nodes) {
    Scored exact, s;
    if (!e.Evaluate(n, req, &exact) || !e.Evaluate(n, shape, &s)) continue;
    if (best < 0 || s.score > *score ||
        (s.score == *score && n.tie_key < e.nodes[static_cast<size_t>(best)].tie_key)) {
      best = n.slot;
      *score = s.score;
    }
  }
  return best;
}

class IndexOracle : public ::testing::TestWithParam<Strategy> {};

TEST_P(IndexOracle, IndexedSelectEqualsFullScan) {
  PoolPolicy p;
  p.strategy = GetParam();
  p.tie_seed = 11;
  EngineImpl e(p);
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(e.AddNode(testing::Node("n" + std::to_string(i), 1 + i % 8, 16000 + 4000 * (i % 5),
                                        65536 << (i % 3)))
                    .ok());
  std::mt19937_64 rng(5);
  std::vector<Allocation> live;
  int placed = 0;
  const Request shapes[] = {testing::Share(470, 4000, 30000),  testing::Share(810, 3000, 5000),
                            testing::Share(230, 12000, 90000), testing::Whole(1, 11000, 48000),
                            testing::Whole(2, 16000, 60000),   testing::Whole(8, 60000, 200000)};
  // 1500 steps: enough touches (> 4 × nodes + 1024) to pass a touch-log compaction too. Every
  // 100 steps the workload changes: the indexes keep their (stale) scores, and 40 nodes are far
  // under the per-decision refresh budget, so the next decision must again equal a full scan.
  for (int step = 0; step < 1500; ++step) {
    if (step % 100 == 99) {
      std::vector<WorkloadClass> w;
      for (const Request& r : shapes) w.push_back({r, static_cast<double>(1 + rng() % 5)});
      e.SetWorkload(w);
    }
    if (!live.empty() && rng() % 4 == 0) {
      const size_t k = rng() % live.size();
      ASSERT_TRUE(e.Release(live[k]).ok());
      live.erase(live.begin() + static_cast<long>(k));
    }
    const Request& r = shapes[rng() % std::size(shapes)];
    const CompiledRequest req = e.Compile(r);
    Scored scored;
    const int got = e.Select(req, &scored, {});
    int64_t want_score = 0;
    const int want = Oracle(e, req, &want_score);
    ASSERT_EQ(got, want) << "step " << step;
    if (got < 0) continue;
    Decision d = e.Place(r, PlaceOptions{false});
    ASSERT_TRUE(d.placed);
    ASSERT_TRUE(e.Commit(d.allocation).ok());
    live.push_back(d.allocation);
    ++placed;
  }
  EXPECT_GT(placed, 500);  // the run did place and release a lot
}

std::vector<Strategy> Deterministic() {
  std::vector<Strategy> out;
  for (Strategy s : AllStrategies())
    if (s != Strategy::kRandom) out.push_back(s);
  return out;
}

TEST(ScoreIndexTest, StaleScoresRefreshWithinTheBudget) {
  // Ten slots scored 0…9 (slot 9 best); then every score is negated (slot 0 best) and the index
  // told its scores are stale. With a budget of 4 per Sync: slots 0–3 are recomputed first (−0 …
  // −3), the stale 4…9 still hold 4…9, so the root is still 9; after the second Sync (4–7
  // recomputed) it is 9 again; the third recomputes 8 and 9 and the root is 0.
  std::vector<int64_t> value = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto fn = [&](int slot, int64_t* score, uint64_t* tie) {
    *score = value[static_cast<size_t>(slot)];
    *tie = 0;
    return true;
  };
  auto all = [](int) { return true; };
  ScoreIndex index;
  index.Resize(10);
  index.Sync(fn);
  EXPECT_EQ(index.Best(all), 9);
  for (int64_t& v : value) v = -v;
  index.MarkAllStale();
  for (int want : {9, 9, 0}) {
    ASSERT_TRUE(index.HasStale());
    index.Sync(fn, 4);
    EXPECT_EQ(index.Best(all), want);
  }
  EXPECT_FALSE(index.HasStale());
  // A budget of at least the slots recomputes everything at once, as a new index would.
  for (int64_t& v : value) v = -v;
  index.MarkAllStale();
  index.Sync(fn, 10);
  EXPECT_FALSE(index.HasStale());
  EXPECT_EQ(index.Best(all), 9);
}

INSTANTIATE_TEST_SUITE_P(Strategies, IndexOracle, ::testing::ValuesIn(Deterministic()),
                         testing::StrategyTestName);

}  // namespace
}  // namespace gpupool::placement
