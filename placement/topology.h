// Topology: a node's GPUs and their links as a Boost.Graph graph, and the choice of the
// best-connected set of devices for a multi-GPU task.
//
// Distance between two devices = the cheapest path over links, each link costing by kind
// (NVLink 1, PCIe switch 2, same NUMA node 4, system 8), capped at the system cost: two GPUs
// always reach each other through the host. A set's cost is the sum of its pairwise distances;
// the best set has the lowest cost (ties: lowest device indices). Pure functions.
#pragma once

#include <span>
#include <vector>

#include "placement/placement.h"
#include "placement/state.h"

namespace gpupool::placement {

int LinkCost(LinkKind kind);

// Row-major device_count² distances (Floyd–Warshall over the link graph). Empty when `links`
// is empty: every pair is then equally far and any set is as good as another.
std::vector<int> BuildDistances(int device_count, std::span<const Link> links);

// Σ pairwise distance of `set` on `node` (0 when the node has no links).
int SetCost(const NodeState& node, const DeviceSet& set);

// Picks `k` of `candidates` with the lowest SetCost: exhaustive when there are few
// combinations, else greedy growth from each starting device. REQUIRES: k ≤ candidates.n.
void BestConnectedSet(const NodeState& node, const DeviceSet& candidates, int k, DeviceSet* chosen);

}  // namespace gpupool::placement
