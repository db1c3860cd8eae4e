#include "placement/sim/forced.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <tuple>

namespace gpupool::placement::sim {
namespace {

constexpr int32_t kGpuMilli = 1000;
// The resources a refusing node can be full in (forced.h): CPU, memory, milli-GPU, GPUs touched.
constexpr size_t kResources = 4;
using Usage = std::array<double, kResources>;

bool Allowed(const std::string& spec, const std::string& model) {
  if (spec.empty()) return true;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find('|', start);
    if (end == std::string::npos) end = spec.size();
    if (spec.compare(start, end - start, model) == 0) return true;
    start = end + 1;
  }
  return false;
}

Usage UsageOf(const TraceTask& t) {
  const bool gpu = t.GpuMilli() > 0;
  return {static_cast<double>(t.cpu_milli), static_cast<double>(t.memory_mib),
          gpu ? static_cast<double>(t.GpuMilli()) : 0.0,
          gpu ? static_cast<double>(t.gpu_milli < kGpuMilli ? 1 : t.num_gpu) : 0.0};
}

struct NodeType {
  int64_t count = 0, cpu = 0, mem = 0;
  int gpus = 0;
  std::string model;
};

// Per node type that could host `t` when empty: how full each resource must be for the node to
// refuse it (0: that resource cannot refuse it). Types that cannot host it at all are left out.
struct Refusal {
  std::vector<int64_t> count;
  std::vector<Usage> threshold;
};

Refusal RefusalOf(const std::vector<NodeType>& types, const TraceTask& t) {
  Refusal out;
  const bool gpu = t.GpuMilli() > 0;
  const bool share = gpu && t.gpu_milli < kGpuMilli;
  for (const NodeType& n : types) {
    if (n.cpu < t.cpu_milli || n.mem < t.memory_mib) continue;
    if (gpu && (n.gpus < (share ? 1 : t.num_gpu) || !Allowed(t.gpu_spec, n.model))) continue;
    Usage thr{static_cast<double>(n.cpu - t.cpu_milli + 1),
              static_cast<double>(n.mem - t.memory_mib + 1), 0, 0};
    if (share) thr[2] = static_cast<double>(n.gpus) * (kGpuMilli + 1 - t.gpu_milli);
    if (gpu && !share) thr[3] = static_cast<double>(n.gpus - t.num_gpu + 1);
    out.count.push_back(n.count);
    out.threshold.push_back(thr);
  }
  return out;
}

// The covering LP's dual (forced.h) gives the test: for any prices p_r ≥ 0 on the resources
// that can refuse the task, the arrivals before i cover at most
//   Σ_t m_t (1 − min(1, min_r p_r thr_{t,r})) + Σ_{k<i} max_r p_r d_{k,r}
// nodes (a task's usage counts towards one refusing resource only: the nodes it sits on refuse
// through one resource each), so the task cannot be refused while
//   L(p) = Σ_t m_t min(1, min_r p_r thr_{t,r})  >  S_p(i) = Σ_{k<i} max_r p_r d_{k,r}.
// Every p is a valid certificate; a grid of directions (steps of 1/kGrid over the simplex of the
// task's refusing resources, each scaled by the pool's mean per node) finds good ones.
constexpr int kGrid = 20;

// The prices of one grid direction over a set of resources (the others 0).
std::vector<Usage> Directions(const std::vector<size_t>& set, const Usage& unit) {
  std::vector<Usage> out;
  std::vector<int> part(set.size(), 0);
  std::function<void(size_t, int)> go = [&](size_t k, int left) {
    if (k + 1 == set.size()) {
      part[k] = left;
      Usage p{};
      for (size_t j = 0; j < set.size(); ++j)
        p[set[j]] = unit[set[j]] > 0 ? part[j] / (kGrid * unit[set[j]]) : 0;
      out.push_back(p);
      return;
    }
    for (int x = 0; x <= left; ++x) part[k] = x, go(k + 1, left - x);
  };
  go(0, kGrid);
  return out;
}

}  // namespace

std::vector<bool> ForcedArrivals(const std::vector<TraceNode>& nodes,
                                 const std::vector<TraceTask>& arrivals) {
  std::vector<NodeType> types;
  Usage unit{};  // the largest node of each resource: the grid's scale, so p·thr ≤ 1
  {
    std::map<std::tuple<int64_t, int64_t, int, std::string>, size_t> index;
    for (const TraceNode& n : nodes) {
      const int gpus = std::max(n.gpus, 0);
      const std::string model = gpus > 0 ? n.model : "";
      auto [it, added] =
          index.try_emplace(std::tuple{n.cpu_milli, n.memory_mib, gpus, model}, types.size());
      if (added) types.push_back(NodeType{0, n.cpu_milli, n.memory_mib, gpus, model});
      ++types[it->second].count;
      const Usage cap{static_cast<double>(n.cpu_milli), static_cast<double>(n.memory_mib),
                      static_cast<double>(kGpuMilli) * gpus, static_cast<double>(gpus)};
      for (size_t k = 0; k < kResources; ++k) unit[k] = std::max(unit[k], cap[k]);
    }
  }
  // The resources that can refuse a CPU-only task, a share and a whole-GPU task.
  const std::vector<std::vector<size_t>> sets = {{0, 1}, {0, 1, 2}, {0, 1, 3}};
  std::vector<std::vector<Usage>> directions;
  // sums[s][d][i]: S_p(i) for direction d of set s.
  std::vector<std::vector<std::vector<double>>> sums(sets.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    directions.push_back(Directions(sets[s], unit));
    for (const Usage& p : directions[s]) {
      std::vector<double> sum(arrivals.size() + 1, 0);
      for (size_t i = 0; i < arrivals.size(); ++i) {
        const Usage d = UsageOf(arrivals[i]);
        double most = 0;
        for (size_t k = 0; k < kResources; ++k) most = std::max(most, p[k] * d[k]);
        sum[i + 1] = sum[i] + most;
      }
      sums[s].push_back(std::move(sum));
    }
  }
  // Per distinct need: how many arrivals, from the first, it is certified for (forced while i is
  // below that).
  std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, size_t> horizon;
  std::vector<bool> forced(arrivals.size(), false);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const TraceTask& t = arrivals[i];
    if (t.cpu_milli <= 0 && t.memory_mib <= 0 && t.GpuMilli() <= 0) continue;
    if (t.GpuMilli() > 0 && t.gpu_milli < kGpuMilli && t.num_gpu != 1) continue;
    auto [it, added] = horizon.try_emplace(
        std::tuple{t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.gpu_spec}, 0);
    if (added) {
      const Refusal r = RefusalOf(types, t);
      const size_t s = t.GpuMilli() <= 0 ? 0 : t.gpu_milli < kGpuMilli ? 1 : 2;
      for (size_t d = 0; d < directions[s].size() && !r.count.empty(); ++d) {
        const Usage& p = directions[s][d];
        double covered = 0;  // L(p)
        for (size_t ty = 0; ty < r.count.size(); ++ty) {
          double least = 1;
          for (size_t k : sets[s])
            if (r.threshold[ty][k] > 0) least = std::min(least, p[k] * r.threshold[ty][k]);
          covered += static_cast<double>(r.count[ty]) * least;
        }
        // A margin of 10⁻⁹ of L for the floating-point sums: forced only while S_p(i) is below.
        const double below = covered * (1 - 1e-9);
        const std::vector<double>& sum = sums[s][d];
        const size_t h =
            static_cast<size_t>(std::lower_bound(sum.begin(), sum.end(), below) - sum.begin());
        it->second = std::max(it->second, h);
      }
    }
    forced[i] = i < it->second;
  }
  return forced;
}

}  // namespace gpupool::placement::sim
