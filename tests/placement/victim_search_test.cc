// Engine::FindVictims against brute force: on small random pools, the set it picks costs exactly
// the minimum over every subset of the pool's lower-priority tasks — fewest victims, then the
// lowest highest priority, then the least work lost — and the scenario (one 4-GPU task
// and twelve 1-GPU tasks, a 4-GPU request) stops one task, not four.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "placement/placement.h"
#include "placement/strategy.h"
#include "tests/placement/test_util.h"

namespace gpupool::placement {
namespace {

using testing::Node;
using testing::Share;
using testing::Whole;

struct Placed {
  std::string id;
  Request request;
  Allocation allocation;
  int32_t priority;
  int64_t work_lost;
};

using Cost = std::tuple<size_t, int32_t, int64_t>;  // victims, highest priority, work lost

Cost CostOf(const std::vector<const Placed*>& set) {
  Cost c{set.size(), INT32_MIN, 0};
  for (const Placed* p : set) {
    std::get<1>(c) = std::max(std::get<1>(c), p->priority);
    std::get<2>(c) += p->work_lost;
  }
  return c;
}

// The minimum cost over every subset of the tasks below `priority`, by releasing each subset on
// the engine and asking whether the request fits. nullopt when no subset makes room.
std::optional<Cost> BruteForce(Engine& e, const std::vector<Placed>& placed, const Request& req,
                               int32_t priority) {
  std::vector<const Placed*> eligible;
  for (const Placed& p : placed) {
    if (p.priority < priority) eligible.push_back(&p);
  }
  std::optional<Cost> best;
  for (uint32_t mask = 0; mask < (1u << eligible.size()); ++mask) {
    std::vector<const Placed*> set;
    for (size_t i = 0; i < eligible.size(); ++i) {
      if (mask & (1u << i)) set.push_back(eligible[i]);
    }
    for (const Placed* p : set) EXPECT_TRUE(e.Release(p->allocation).ok());
    bool fits = e.Place(req).placed;
    for (const Placed* p : set) EXPECT_TRUE(e.Commit(p->allocation).ok());
    if (fits && (!best || CostOf(set) < *best)) best = CostOf(set);
  }
  return best;
}

// One random round: a pool of 1-3 nodes filled with lower- and higher-priority tasks, then a
// request; FindVictims must cost exactly the brute-force minimum and name a set that makes room.
// Returns whether it found victims (so the callers can check the cases exercised the search).
struct RoundShape {
  PoolPolicy policy;
  bool tight_cpu = false;    // nodes of 8-24 cores and requests of 1-12: CPU decides too
  bool time_sliced = false;  // time-slice slots instead of shares
  bool mig = false;          // each node also has 1-3 MIG instances; some requests ask for one
};

// A request for one MIG instance of `profile`.
Request MigInstance(std::string profile, int64_t cpu) {
  Request r;
  r.kind = RequestKind::kMig;
  r.mig_profile = std::move(profile);
  r.cpu_milli = cpu;
  r.memory_mib = 1024;
  return r;
}

bool RandomRound(std::mt19937& rng, const RoundShape& shape, int round) {
  Engine e(shape.policy);
  const int nodes = 1 + static_cast<int>(rng() % 3);
  for (int n = 0; n < nodes; ++n) {
    const int64_t cpu = shape.tight_cpu ? 8000 * (1 + static_cast<int64_t>(rng() % 3)) : 64000;
    NodeSpec node = Node("n" + std::to_string(n), 2 + static_cast<int>(rng() % 4), cpu);
    const int instances = shape.mig ? 1 + static_cast<int>(rng() % 3) : 0;
    for (int i = 0; i < instances; ++i) {
      DeviceSpec d = testing::Gpu(node.name + "-mig" + std::to_string(i), "A100", 14, 10240);
      d.mig_profile = rng() % 2 == 0 ? "1g.10gb" : "3g.40gb";
      node.devices.push_back(d);
    }
    EXPECT_TRUE(e.AddNode(node).ok());
  }
  auto cores = [&] {
    return shape.tight_cpu ? 1000 * (1 + static_cast<int64_t>(rng() % 12)) : int64_t{1000};
  };
  auto small = [&]() -> Request {
    if (shape.time_sliced) {
      Request r;
      r.kind = RequestKind::kTimeSlice;
      r.cpu_milli = cores();
      r.memory_mib = 1024;
      return r;
    }
    return Share(250 * (1 + static_cast<int32_t>(rng() % 4)), cores());
  };
  auto any = [&]() -> Request {
    if (shape.mig && rng() % 3 == 0)
      return MigInstance(rng() % 2 == 0 ? "1g.10gb" : "3g.40gb", cores());
    switch (rng() % 4) {
      case 0:
        return small();
      case 1:
        if (shape.tight_cpu) {
          Request r;
          r.kind = RequestKind::kCpuOnly;
          r.gpu_count = 0;
          r.cpu_milli = cores();
          r.memory_mib = 1024;
          return r;
        }
        [[fallthrough]];
      default:
        return Whole(1 + static_cast<int>(rng() % 3), cores());
    }
  };
  // Fill until nothing more fits (at most 12 tasks).
  std::vector<Placed> placed;
  for (int tries = 0; tries < 40 && placed.size() < 12; ++tries) {
    Request r = any();
    Decision d = e.Place(r);
    if (!d.placed) continue;
    EXPECT_TRUE(e.Commit(d.allocation).ok());
    placed.push_back(Placed{"t" + std::to_string(placed.size()), r, d.allocation,
                            static_cast<int32_t>(rng() % 3), static_cast<int64_t>(rng() % 5) * 10});
  }
  std::vector<RunningTask> running;
  for (const Placed& p : placed)
    running.push_back(RunningTask{p.id, p.allocation, p.priority, p.work_lost});
  const Request req = any();
  const int32_t priority = 1 + static_cast<int32_t>(rng() % 3);

  VictimSet v = e.FindVictims(req, priority, running);
  std::optional<Cost> want = BruteForce(e, placed, req, priority);
  EXPECT_EQ(v.found, want.has_value()) << "round " << round;
  if (!v.found || !want) return false;
  std::vector<const Placed*> chosen;
  for (const std::string& id : v.task_ids) {
    for (const Placed& p : placed) {
      if (p.id == id) chosen.push_back(&p);
    }
  }
  EXPECT_EQ(chosen.size(), v.task_ids.size());
  EXPECT_EQ(CostOf(chosen), *want) << "round " << round;
  // The set it names does make room, where it says.
  for (const Placed* p : chosen) EXPECT_TRUE(e.Release(p->allocation).ok());
  EXPECT_TRUE(e.Commit(v.decision.allocation).ok()) << "round " << round;
  return !v.task_ids.empty();
}

TEST(VictimSearchTest, MinimumSetAgainstBruteForce) {
  std::mt19937 rng(42);
  int cases_with_victims = 0;
  for (int round = 0; round < 300; ++round) cases_with_victims += RandomRound(rng, {}, round);
  EXPECT_GT(cases_with_victims, 50);  // the cases did exercise the search
}

// The same against every strategy (each scores, and may refuse, a node its own way), on nodes
// whose CPU runs out and with CPU-only tasks, with MIG instances beside whole GPUs, and in
// time-sliced pools: the search's "no room"
// shortcut (release every candidate; if the request still does not fit, no subset makes it) must
// agree with brute force wherever a strategy or a resource could make releasing non-monotone.
class VictimSearchStrategyTest : public ::testing::TestWithParam<Strategy> {};

TEST_P(VictimSearchStrategyTest, MinimumSetAgainstBruteForce) {
  std::mt19937 rng(7);
  for (const bool time_sliced : {false, true}) {
    RoundShape shape;
    shape.mig = true;
    shape.policy.strategy = GetParam();
    shape.policy.tie_seed = 3;
    shape.tight_cpu = true;
    shape.time_sliced = time_sliced;
    if (time_sliced) {
      shape.policy.sharing = SharingMode::kTimeSliced;
      shape.policy.replicas = 3;
    }
    int cases_with_victims = 0;
    for (int round = 0; round < 150; ++round) cases_with_victims += RandomRound(rng, shape, round);
    EXPECT_GT(cases_with_victims, 15) << (time_sliced ? "time-sliced" : "fractional");
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, VictimSearchStrategyTest, ::testing::ValuesIn(AllStrategies()),
                         testing::StrategyTestName);

// The scenario: 16 GPUs on two nodes hold one 4-GPU task and twelve 1-GPU tasks, all of
// one low priority; a 4-GPU request stops the 4-GPU task alone (the greedy search stopped four).
TEST(VictimSearchTest, OneFourGpuTaskRatherThanFourSmallOnes) {
  Engine e(PoolPolicy{});
  ASSERT_TRUE(e.AddNode(Node("a", 8)).ok());
  ASSERT_TRUE(e.AddNode(Node("b", 8)).ok());
  std::vector<RunningTask> running;
  auto run = [&](const std::string& id, Request r, int64_t lost) {
    Decision d = e.Place(r);
    ASSERT_TRUE(d.placed) << id;
    ASSERT_TRUE(e.Commit(d.allocation).ok());
    running.push_back(RunningTask{id, d.allocation, 0, lost});
  };
  run("big", Whole(4), 100);  // the most work lost of all, still the one to stop
  for (int i = 0; i < 12; ++i) run("small" + std::to_string(i), Whole(1), 10);
  ASSERT_FALSE(e.Place(Whole(4)).placed);
  VictimSet v = e.FindVictims(Whole(4), 1, running);
  ASSERT_TRUE(v.found);
  EXPECT_EQ(v.task_ids, std::vector<std::string>{"big"});
}

}  // namespace
}  // namespace gpupool::placement
