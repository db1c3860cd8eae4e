// placement_latency: decision latency of the placement engine at 1k, 10k and 50k nodes.
//
// A synthetic pool with the Alibaba trace's hardware mix (8-GPU/96-core, 2-GPU/104-core, …) is
// filled to about 70% with trace-like tasks; each iteration then places one task, commits it and
// releases the oldest one, so the pool stays at steady state and every decision sees the nodes it
// touched dirty in the score index — the work a live scheduler does per task.
//
// BM_PlaceLearning does the same the way gpupoold runs fgd and fgd-pack: no workload given up
// front; each task is first observed by the pool's WorkloadFeed (workload_feed.h), which pushes
// the learned model into the engine when due (1, 2, 4, … 2048 tasks, then every 2048), making
// its cached scores stale — each decision recomputes at most 4,096 stale nodes of its shape
// (score_index.h). Its time per iteration includes those pushes and refreshes, amortised; push_ms
// is the mean cost of one push plus one decision of every shape right after it.
//
// BM_WorkloadPush isolates one push of a changed mix: stall_ms (the push and the next decision of
// every shape) and total_ms (until every stale score is recomputed).
//
//   build-placement/bench/placement_latency --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "placement/placement.h"
#include "placement/workload_feed.h"

namespace {

using namespace gpupool;
using namespace gpupool::placement;

struct Shape {
  int32_t milli;  // < 1000: a share; 1000: whole GPUs
  int count;
  int64_t cpu, mem;
  double weight;
};

// The default trace's most common task shapes (shares, whole GPUs, CPU-only) and their weights.
const std::vector<Shape> kShapes = {
    {810, 1, 3152, 5600, 13},    {470, 1, 11908, 47104, 9}, {320, 1, 8000, 30517, 4},
    {650, 1, 4000, 16384, 3},    {230, 1, 4000, 16384, 2},  {1000, 1, 11300, 49152, 11},
    {1000, 1, 11400, 48128, 7},  {1000, 1, 3152, 16384, 6}, {1000, 2, 16000, 65536, 1},
    {1000, 8, 64200, 263168, 1}, {0, 0, 4000, 16384, 13},
};

Request ToRequest(const Shape& s) {
  Request r;
  r.cpu_milli = s.cpu;
  r.memory_mib = s.mem;
  if (s.count == 0) {
    r.kind = RequestKind::kCpuOnly;
  } else if (s.milli < 1000) {
    r.share_milli = s.milli;
  } else {
    r.kind = RequestKind::kWholeGpu;
    r.gpu_count = s.count;
  }
  return r;
}

NodeSpec MakeNode(int i) {
  // Trace mix: 45% 8×G2/96 cores, 33% 2×T4/104 cores, 11% 2×P100/16 cores, 11% 4×V100/32 cores.
  static const struct {
    int gpus;
    int64_t cpu, mem;
    const char* model;
  } kTypes[] = {{8, 96000, 393216, "G2"},
                {2, 104000, 524288, "T4"},
                {2, 16000, 122880, "P100"},
                {4, 32000, 131072, "V100M16"}};
  const int pick = i % 9 < 4 ? 0 : i % 9 < 7 ? 1 : i % 9 == 7 ? 2 : 3;
  NodeSpec n;
  n.name = "node-" + std::to_string(i);
  n.cpu_milli = kTypes[pick].cpu;
  n.memory_mib = kTypes[pick].mem;
  for (int g = 0; g < kTypes[pick].gpus; ++g) {
    DeviceSpec d;
    d.id = n.name + "/gpu" + std::to_string(g);
    d.model = kTypes[pick].model;
    d.physical = Resources{100000, 32768};
    n.devices.push_back(d);
  }
  return n;
}

// Adds the pool's `nodes` nodes (MakeNode) to `engine`; returns their GPU count.
int64_t AddNodes(Engine& engine, int nodes, benchmark::State& state) {
  int64_t gpus = 0;
  for (int i = 0; i < nodes; ++i) {
    NodeSpec n = MakeNode(i);
    gpus += static_cast<int64_t>(n.devices.size());
    if (!engine.AddNode(n).ok()) state.SkipWithError("AddNode failed");
  }
  return gpus;
}

void BM_PlaceCommitRelease(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  PoolPolicy policy;
  policy.strategy = static_cast<Strategy>(state.range(1));
  policy.tie_seed = 42;
  Engine engine(policy);
  const int64_t gpus = AddNodes(engine, nodes, state);
  std::vector<WorkloadClass> workload;
  std::vector<double> weights;
  for (const Shape& s : kShapes) {
    workload.push_back(WorkloadClass{ToRequest(s), s.weight});
    weights.push_back(s.weight);
  }
  engine.SetWorkload(workload);
  std::mt19937_64 rng(7);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::deque<Allocation> live;
  // Fill to ≈70% of the GPU share.
  int64_t used = 0;
  while (used < gpus * 700) {
    const Shape& s = kShapes[pick(rng)];
    Decision d = engine.Place(ToRequest(s), PlaceOptions{false});
    if (!d.placed) break;
    if (!engine.Commit(d.allocation).ok()) break;
    used += static_cast<int64_t>(s.milli) * s.count;
    live.push_back(std::move(d.allocation));
  }
  int64_t placed = 0, decisions = 0;
  for (auto _ : state) {
    Decision d = engine.Place(ToRequest(kShapes[pick(rng)]), PlaceOptions{false});
    ++decisions;
    if (d.placed && engine.Commit(d.allocation).ok()) {
      ++placed;
      live.push_back(std::move(d.allocation));
    }
    if (!live.empty()) {
      benchmark::DoNotOptimize(engine.Release(live.front()));
      live.pop_front();
    }
  }
  state.counters["nodes"] = nodes;
  state.counters["placed_pct"] =
      decisions ? 100.0 * static_cast<double>(placed) / static_cast<double>(decisions) : 0;
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(StrategyName(policy.strategy)));
}

void BM_PlaceLearning(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  PoolPolicy policy;
  policy.strategy = static_cast<Strategy>(state.range(1));
  policy.tie_seed = PoolTieSeed("bench");
  Engine engine(policy);
  const int64_t gpus = AddNodes(engine, nodes, state);
  std::vector<double> weights;
  for (const Shape& s : kShapes) weights.push_back(s.weight);
  WorkloadFeed feed;
  feed.Sync(engine);
  std::mt19937_64 rng(7);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  std::deque<Allocation> live;
  int64_t used = 0;
  while (used < gpus * 700) {
    const Shape& s = kShapes[pick(rng)];
    const Request r = ToRequest(s);
    feed.Observe(r);
    feed.Sync(engine);
    Decision d = engine.Place(r, PlaceOptions{false});
    if (!d.placed || !engine.Commit(d.allocation).ok()) break;
    used += static_cast<int64_t>(s.milli) * s.count;
    live.push_back(std::move(d.allocation));
  }
  int64_t placed = 0, decisions = 0, pushes = 0;
  double push_seconds = 0;
  for (auto _ : state) {
    const Request r = ToRequest(kShapes[pick(rng)]);
    feed.Observe(r);
    const auto t0 = std::chrono::steady_clock::now();
    const bool pushed = feed.Sync(engine);
    Decision d = engine.Place(r, PlaceOptions{false});
    if (pushed) {
      // The push and one decision of every shape after it (each with its share of the rescan).
      for (const Shape& s : kShapes)
        benchmark::DoNotOptimize(engine.Place(ToRequest(s), PlaceOptions{false}));
      push_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++pushes;
    }
    ++decisions;
    if (d.placed && engine.Commit(d.allocation).ok()) {
      ++placed;
      live.push_back(std::move(d.allocation));
    }
    if (!live.empty()) {
      benchmark::DoNotOptimize(engine.Release(live.front()));
      live.pop_front();
    }
  }
  state.counters["nodes"] = nodes;
  state.counters["pushes"] = static_cast<double>(pushes);
  state.counters["push_ms"] = pushes ? 1000 * push_seconds / static_cast<double>(pushes) : 0;
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(decisions), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(StrategyName(policy.strategy)) + " learning");
}

// BM_WorkloadPush: what a push of a changed mix costs a pool at steady state. The pool is filled
// to ≈70% as above; each iteration pushes a mix (the trace's weights, then the same with the
// 810s doubled, alternately) and makes rounds of one decision of every shape. stall_ms: the push
// plus the first round — what the next task of each shape waits; total_ms: the push plus 13
// rounds, by which time a 50,000-node pool has recomputed every stale score (4,096 per decision).
void BM_WorkloadPush(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  PoolPolicy policy;
  policy.strategy = static_cast<Strategy>(state.range(1));
  policy.tie_seed = PoolTieSeed("bench");
  Engine engine(policy);
  const int64_t gpus = AddNodes(engine, nodes, state);
  std::vector<WorkloadClass> mix[2];
  std::vector<double> weights;
  for (const Shape& s : kShapes) {
    mix[0].push_back(WorkloadClass{ToRequest(s), s.weight});
    mix[1].push_back(WorkloadClass{ToRequest(s), s.milli == 810 ? 2 * s.weight : s.weight});
    weights.push_back(s.weight);
  }
  engine.SetWorkload(mix[0]);
  std::mt19937_64 rng(7);
  std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
  int64_t used = 0;
  while (used < gpus * 700) {
    const Shape& s = kShapes[pick(rng)];
    Decision d = engine.Place(ToRequest(s), PlaceOptions{false});
    if (!d.placed || !engine.Commit(d.allocation).ok()) break;
    used += static_cast<int64_t>(s.milli) * s.count;
  }
  int64_t pushes = 0;
  double stall = 0, total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    engine.SetWorkload(mix[(pushes + 1) % 2]);
    for (int round = 0; round < 13; ++round) {
      for (const Shape& s : kShapes)
        benchmark::DoNotOptimize(engine.Place(ToRequest(s), PlaceOptions{false}));
      if (round == 0)
        stall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++pushes;
  }
  state.counters["nodes"] = nodes;
  state.counters["stall_ms"] = pushes ? 1000 * stall / static_cast<double>(pushes) : 0;
  state.counters["total_ms"] = pushes ? 1000 * total / static_cast<double>(pushes) : 0;
  state.SetLabel(std::string(StrategyName(policy.strategy)) + " push");
}

void Args(benchmark::internal::Benchmark* b) {
  for (Strategy s : {Strategy::kFgdPack, Strategy::kFgd, Strategy::kBestFit, Strategy::kFirstFit})
    for (int n : {1000, 10000, 50000}) b->Args({n, static_cast<int64_t>(s)});
  b->Unit(benchmark::kMicrosecond);
}

void LearningArgs(benchmark::internal::Benchmark* b) {
  for (Strategy s : {Strategy::kFgdPack, Strategy::kFgd})
    for (int n : {1000, 10000, 50000}) b->Args({n, static_cast<int64_t>(s)});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_PlaceCommitRelease)->Apply(Args);
BENCHMARK(BM_PlaceLearning)->Apply(LearningArgs);
BENCHMARK(BM_WorkloadPush)->Apply(LearningArgs)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
