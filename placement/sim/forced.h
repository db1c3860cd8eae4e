// Forced arrivals: tasks that every protocol-following policy places, whatever it did before —
// the protocol bound's (bound.h, part 3) strongest fact where CPU, not GPU, runs out.
//
// A task is dropped only when no node can host it. A node that could host task i when empty
// refuses it only if one of its resources is too full for i:
//   CPU     used > C − c                    (used ≥ C − c + 1 milli)
//   memory  used > M − m                    (used ≥ M − m + 1 MiB)
//   GPUs    a share s: every GPU holds more than 1000 − s, so the node holds ≥ G·(1001 − s) milli;
//           k whole GPUs: fewer than k are idle, so ≥ G − k + 1 of its GPUs hold some task.
// So each refusing node has Σ_r used_r / thr_r ≥ 1 over those resources (thr_r the right-hand
// sides above). Tasks never depart and only arrivals before i can be on the nodes when i arrives,
// so what is in use then is at most U_r, what tasks 0…i−1 ask for together (CPU, memory,
// milli-GPU, and GPUs touched: a share touches one GPU, a k-GPU task k). Task i can be refused
// only if U can be split over the node types so that every node that could host i when empty is
// covered: Y_{t,r} ≥ 0 nodes of type t refused through r, Σ_r Y_{t,r} ≥ m_t, Σ_t thr_{t,r}·Y_{t,r}
// ≤ U_r. When that small LP has no solution, task i is placed by every protocol-following policy.
// The LP is a relaxation (a node may need less than one whole resource, tasks split across nodes),
// so it only ever says "forced" when the task truly is; the answer keeps a margin of 1% of a node
// for floating point. Thread safety: plain functions.
#pragma once

#include <vector>

#include "placement/sim/trace.h"

namespace gpupool::placement::sim {

// Per arrival: true when every protocol-following policy places it (above). Tasks that need
// nothing, and tasks no node can host even empty, are never forced.
std::vector<bool> ForcedArrivals(const std::vector<TraceNode>& nodes,
                                 const std::vector<TraceTask>& arrivals);

}  // namespace gpupool::placement::sim
