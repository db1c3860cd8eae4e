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
    if (gpu && (n.gpus < (share ? 1 : t.num_gpu) || !SpecAllowsModel(t.gpu_spec, n.model)))
      continue;
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
  // The distinct needs, each with the nodes that could host it and the resources that can refuse
  // it (set 0: CPU-only task, 1: a share, 2: whole GPUs); `horizon`: how many arrivals, from the
  // first, it is certified for (an arrival is forced while its index is below).
  const std::vector<std::vector<size_t>> sets = {{0, 1}, {0, 1, 2}, {0, 1, 3}};
  struct Need {
    size_t set;
    Refusal refusal;
    size_t horizon = 0;
  };
  std::vector<Need> needs;
  std::vector<int> need_of(arrivals.size(), -1);
  {
    std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, int> index;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const TraceTask& t = arrivals[i];
      if (t.cpu_milli <= 0 && t.memory_mib <= 0 && t.GpuMilli() <= 0) continue;
      if (t.GpuMilli() > 0 && t.gpu_milli < kGpuMilli && t.num_gpu != 1) continue;
      auto [it, added] = index.try_emplace(
          std::tuple{t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.gpu_spec},
          static_cast<int>(needs.size()));
      if (added) {
        const size_t set = t.GpuMilli() <= 0 ? 0 : t.gpu_milli < kGpuMilli ? 1 : 2;
        needs.push_back(Need{set, RefusalOf(types, t)});
      }
      need_of[i] = it->second;
    }
  }
  // Per direction p: S_p over the arrivals, then each need's horizon under p (the largest kept).
  std::vector<double> sum(arrivals.size() + 1, 0);
  for (size_t s = 0; s < sets.size(); ++s) {
    for (const Usage& p : Directions(sets[s], unit)) {
      for (size_t i = 0; i < arrivals.size(); ++i) {
        const Usage d = UsageOf(arrivals[i]);
        double most = 0;
        for (size_t k = 0; k < kResources; ++k) most = std::max(most, p[k] * d[k]);
        sum[i + 1] = sum[i] + most;
      }
      for (Need& n : needs) {
        if (n.set != s) continue;
        double covered = 0;  // L(p)
        for (size_t ty = 0; ty < n.refusal.count.size(); ++ty) {
          double least = 1;
          for (size_t k : sets[s])
            if (n.refusal.threshold[ty][k] > 0)
              least = std::min(least, p[k] * n.refusal.threshold[ty][k]);
          covered += static_cast<double>(n.refusal.count[ty]) * least;
        }
        // A margin of 10⁻⁹ of L for the floating-point sums: forced only while S_p(i) is below.
        const double below = covered * (1 - 1e-9);
        const size_t h =
            static_cast<size_t>(std::lower_bound(sum.begin(), sum.end(), below) - sum.begin());
        n.horizon = std::max(n.horizon, h);
      }
    }
  }
  std::vector<bool> forced(arrivals.size(), false);
  for (size_t i = 0; i < arrivals.size(); ++i)
    forced[i] = need_of[i] >= 0 && i < needs[static_cast<size_t>(need_of[i])].horizon;
  return forced;
}

}  // namespace gpupool::placement::sim
