#include "placement/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "placement/workload_feed.h"

namespace gpupool::placement::sim {
namespace {

// Uniform in [0, n) from a 64-bit draw (multiply-shift; std distributions differ across
// standard libraries, this does not).
uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

}  // namespace

double ReplayResult::UnallocatedAt(int x) const {
  if (x < 0 || static_cast<size_t>(x) >= alloc_pct.size() || alloc_pct[static_cast<size_t>(x)] < 0)
    return NAN;
  return 100.0 - alloc_pct[static_cast<size_t>(x)];
}

int64_t CapacityMilli(const std::vector<TraceNode>& nodes) {
  int64_t c = 0;
  for (const TraceNode& n : nodes) c += int64_t{1000} * n.gpus;
  return c;
}

std::vector<TraceTask> Arrivals(const std::vector<TraceTask>& trace, uint64_t seed, double tune,
                                int64_t capacity_milli) {
  std::mt19937_64 rng(seed);
  std::vector<TraceTask> out = trace;
  for (size_t i = out.size(); i > 1; --i)
    std::swap(out[i - 1], out[Below(rng, i)]);  // Fisher–Yates
  int64_t total = 0;
  for (const TraceTask& t : out) total += t.GpuMilli();
  const auto target = static_cast<int64_t>(tune * static_cast<double>(capacity_milli));
  while (!trace.empty() && total < target) {
    const TraceTask& t = trace[Below(rng, trace.size())];
    total += t.GpuMilli();
    out.push_back(t);
  }
  return out;
}

std::vector<WorkloadClass> TargetWorkload(const std::vector<TraceTask>& trace, double coverage) {
  using Key = std::tuple<int64_t, int32_t, int, std::string>;
  std::map<Key, std::pair<int64_t, size_t>> counts;  // count, first appearance
  std::map<Key, int64_t> memory;                     // Σ memory, for the class mean
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceTask& t = trace[i];
    auto [it, inserted] =
        counts.try_emplace(Key{t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec}, 0, i);
    ++it->second.first;
    memory[it->first] += t.memory_mib;
  }
  std::vector<std::pair<Key, std::pair<int64_t, size_t>>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first
                                            : a.second.second < b.second.second;
  });
  std::vector<WorkloadClass> out;
  int64_t covered = 0;
  for (const auto& [key, c] : sorted) {
    TraceTask t;
    std::tie(t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec) = key;
    if (static_cast<double>(covered) >= coverage * static_cast<double>(trace.size())) break;
    covered += c.first;
    t.memory_mib = memory[key] / c.first;
    out.push_back(WorkloadClass{ToRequest(t), static_cast<double>(c.first)});
  }
  return out;
}

std::vector<WorkloadClass> WorkloadFor(Strategy s, const std::vector<TraceTask>& trace) {
  return TargetWorkload(trace, s == Strategy::kFgdPack ? 1.0 : 0.95);
}

namespace {

// The replay loop: `feed` null is oracle mode (the engine already has its workload).
Result<ReplayResult> Run(const std::vector<TraceNode>& nodes,
                         const std::vector<TraceTask>& arrivals, Engine& engine, WorkloadFeed* feed,
                         Strategy strategy, uint64_t seed, size_t limit,
                         std::vector<std::string>* decisions) {
  ReplayResult r;
  r.strategy = strategy;
  r.seed = seed;
  const int64_t capacity = CapacityMilli(nodes);
  if (capacity <= 0) return Status::InvalidArgument("the node list has no GPU");
  std::vector<double> sum(kMaxArrivedPct + 1, 0.0);
  std::vector<int64_t> events(kMaxArrivedPct + 1, 0);
  int64_t arrived = 0, used = 0;
  const size_t n = limit > 0 ? std::min(limit, arrivals.size()) : arrivals.size();
  for (size_t i = 0; i < n; ++i) {
    const TraceTask& t = arrivals[i];
    const Request req = ToRequest(t);
    if (feed != nullptr) {
      feed->Observe(req, 1);
      feed->Sync(engine);
    }
    const Decision d = engine.Place(req, PlaceOptions{false});
    const bool placed = d.placed && engine.Commit(d.allocation).ok();
    if (placed) {
      used += t.GpuMilli();
      ++r.placed;
    } else {
      ++r.dropped;
    }
    if (decisions != nullptr) decisions->push_back(placed ? d.allocation.node : std::string());
    arrived += t.GpuMilli();
    const long x =
        std::lround(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity));
    if (x >= 0 && x <= kMaxArrivedPct) {
      sum[static_cast<size_t>(x)] +=
          100.0 * static_cast<double>(used) / static_cast<double>(capacity);
      ++events[static_cast<size_t>(x)];
    }
  }
  r.tasks = static_cast<int64_t>(n);
  r.alloc_pct.assign(kMaxArrivedPct + 1, -1.0);
  for (size_t x = 0; x < sum.size(); ++x)
    if (events[x] > 0) r.alloc_pct[x] = sum[x] / static_cast<double>(events[x]);
  return r;
}

Result<Engine> MakeEngine(const std::vector<TraceNode>& nodes, Strategy strategy, uint64_t seed) {
  PoolPolicy policy;
  policy.strategy = strategy;
  policy.tie_seed = seed;
  Engine engine(policy);
  for (const TraceNode& n : nodes) GPUPOOL_RETURN_IF_ERROR(engine.AddNode(ToNodeSpec(n)));
  return engine;
}

}  // namespace

Result<ReplayResult> Replay(const std::vector<TraceNode>& nodes,
                            const std::vector<TraceTask>& arrivals,
                            const std::vector<WorkloadClass>& workload, Strategy strategy,
                            uint64_t seed, size_t limit) {
  GPUPOOL_ASSIGN_OR_RETURN(Engine engine, MakeEngine(nodes, strategy, seed));
  engine.SetWorkload(workload);
  return Run(nodes, arrivals, engine, nullptr, strategy, seed, limit, nullptr);
}

Result<ReplayResult> ReplayOnline(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, Strategy strategy,
                                  uint64_t seed, size_t limit,
                                  std::vector<std::string>* decisions) {
  GPUPOOL_ASSIGN_OR_RETURN(Engine engine,
                           MakeEngine(nodes, strategy, ReplayTieSeed(strategy, seed)));
  WorkloadFeed feed;
  feed.Sync(engine);  // the prior, as a new pool's engine gets it
  return Run(nodes, arrivals, engine, &feed, strategy, seed, limit, decisions);
}

}  // namespace gpupool::placement::sim
