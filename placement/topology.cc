#include "placement/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/floyd_warshall_shortest.hpp>
#include <limits>

namespace gpupool::placement {
namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                                    boost::no_property, boost::property<boost::edge_weight_t, int>>;

constexpr int kSystemCost = 8;
// Above this many combinations, grow sets greedily instead of trying them all.
constexpr long kMaxExhaustive = 512;

long Choose(int n, int k) {
  long c = 1;
  for (int i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > kMaxExhaustive) return c;
  }
  return c;
}

int Dist(const NodeState& node, int a, int b) {
  return node.dist[static_cast<size_t>(a) * node.devices.size() + static_cast<size_t>(b)];
}

// Greedy: from each start, add the candidate closest to the set so far; keep the cheapest.
void Greedy(const NodeState& node, const DeviceSet& cand, int k, DeviceSet* best) {
  int best_cost = std::numeric_limits<int>::max();
  for (int s = 0; s < cand.n; ++s) {
    DeviceSet set;
    std::vector<bool> used(static_cast<size_t>(cand.n), false);
    set.Push(cand.idx[static_cast<size_t>(s)]);
    used[static_cast<size_t>(s)] = true;
    int cost = 0;
    while (set.n < k) {
      int pick = -1, pick_add = std::numeric_limits<int>::max();
      for (int c = 0; c < cand.n; ++c) {
        if (used[static_cast<size_t>(c)]) continue;
        int add = 0;
        for (int j = 0; j < set.n; ++j)
          add += Dist(node, cand.idx[static_cast<size_t>(c)], set.idx[static_cast<size_t>(j)]);
        if (add < pick_add) pick = c, pick_add = add;
      }
      used[static_cast<size_t>(pick)] = true;
      set.Push(cand.idx[static_cast<size_t>(pick)]);
      cost += pick_add;
    }
    if (cost < best_cost) best_cost = cost, *best = set;
  }
}

// Exhaustive over combinations in lexicographic order, so ties keep the lowest indices.
void Exhaustive(const NodeState& node, const DeviceSet& cand, int k, DeviceSet* best) {
  std::vector<int> pos(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) pos[static_cast<size_t>(i)] = i;
  int best_cost = std::numeric_limits<int>::max();
  while (true) {
    DeviceSet set;
    for (int p : pos) set.Push(cand.idx[static_cast<size_t>(p)]);
    const int cost = SetCost(node, set);
    if (cost < best_cost) best_cost = cost, *best = set;
    int i = k - 1;
    while (i >= 0 && pos[static_cast<size_t>(i)] == cand.n - k + i) --i;
    if (i < 0) return;
    ++pos[static_cast<size_t>(i)];
    for (int j = i + 1; j < k; ++j)
      pos[static_cast<size_t>(j)] = pos[static_cast<size_t>(j - 1)] + 1;
  }
}

}  // namespace

int LinkCost(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink:
      return 1;
    case LinkKind::kPcieSwitch:
      return 2;
    case LinkKind::kPcieHost:
      return 4;
    case LinkKind::kSystem:
      return kSystemCost;
  }
  return kSystemCost;
}

std::vector<int> BuildDistances(int device_count, std::span<const Link> links) {
  if (links.empty() || device_count == 0) return {};
  Graph g(static_cast<size_t>(device_count));
  for (const Link& l : links)
    boost::add_edge(static_cast<size_t>(l.a), static_cast<size_t>(l.b), LinkCost(l.kind), g);
  const auto n = static_cast<size_t>(device_count);
  std::vector<std::vector<int>> d(n, std::vector<int>(n, 0));
  boost::floyd_warshall_all_pairs_shortest_paths(
      g, d, boost::distance_inf(std::numeric_limits<int>::max() / 4));
  std::vector<int> out(n * n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) out[i * n + j] = std::min(d[i][j], i == j ? 0 : kSystemCost);
  return out;
}

int SetCost(const NodeState& node, const DeviceSet& set) {
  if (node.dist.empty()) return 0;
  int cost = 0;
  for (int i = 0; i < set.n; ++i)
    for (int j = i + 1; j < set.n; ++j)
      cost += Dist(node, set.idx[static_cast<size_t>(i)], set.idx[static_cast<size_t>(j)]);
  return cost;
}

void BestConnectedSet(const NodeState& node, const DeviceSet& candidates, int k,
                      DeviceSet* chosen) {
  chosen->n = 0;
  if (node.dist.empty() || k <= 1 || k == candidates.n) {
    for (int i = 0; i < k; ++i) chosen->Push(candidates.idx[static_cast<size_t>(i)]);
    return;
  }
  if (Choose(candidates.n, k) <= kMaxExhaustive) {
    Exhaustive(node, candidates, k, chosen);
  } else {
    Greedy(node, candidates, k, chosen);
  }
}

}  // namespace gpupool::placement
