// fgd-pack: our strategy. FGD's fragmentation gradient plus a counting measure of what the node
// can still host, quantised coarsely so that near-ties consolidate in the pool's tie order.
//
// cost = ΔH + 2·ΔF (frag.h): ΔF is FGD's "will the next typical task fit at all", ΔH counts how
// many tasks of each class still fit by GPU share, CPU and memory, weighted up for classes few
// nodes can host (so a 120-core 8-GPU node is not nibbled away by small tasks). Score =
// ⌊−cost / 40⌋ milli-GPU; equal scores go to the pool's tie order, which fills nodes in a fixed
// order (consolidation). Give it the whole class list (SetWorkload with every shape), not
// FGD's top 95%: the rare big shapes are the ones that need protecting.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFgdPack) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

// Cost in milli-GPU (lower is better) and the score it maps to.
double FgdPackCost(double delta_h, double delta_f);
int64_t FgdPackScore(double cost);

}  // namespace gpupool::placement
