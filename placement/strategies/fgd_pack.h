// fgd-pack: our strategy. FGD's fragmentation gradient plus a counting measure of what the node
// can still host, quantised coarsely so that near-ties consolidate in the pool's tie order.
//
// cost = ΔH + w·ΔF (frag.h): ΔF is FGD's "will the next typical task fit at all", ΔH counts how
// many tasks of each class still fit by GPU share, CPU and memory, weighted up for classes few
// nodes can host (so a 120-core 8-GPU node is not nibbled away by small tasks). w = 2, or 10
// when multi-GPU tasks bring a quarter or more of the workload's GPU demand. Score =
// ⌊−cost / (20·w)⌋, i.e. ΔF quantised in steps of 20 milli-GPU; equal scores go to the pool's
// tie order, which fills nodes in a fixed order (consolidation). Give it the whole class list
// (SetWorkload with every shape), not FGD's top 95%: the rare big shapes need protecting.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFgdPack) returns it. Thread safety: none.
#pragma once

#include <vector>

#include "placement/plugin.h"

namespace gpupool::placement {

// w for a workload; the cost in milli-GPU (lower is better) and the score it maps to.
double FgdPackWeight(const std::vector<FragClass>& workload);
double FgdPackCost(double delta_h, double delta_f, double fgd_weight);
int64_t FgdPackScore(double cost, double fgd_weight);

}  // namespace gpupool::placement
