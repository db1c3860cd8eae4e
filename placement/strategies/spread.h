// spread: the node left with the most idle GPU share (then most CPU): spreads load so that one
// node's failure costs the least.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kSpread) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

// idle milli-GPU left on the node after the placement, then free CPU cores: higher is emptier.
int64_t SpreadScore(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen);

}  // namespace gpupool::placement
