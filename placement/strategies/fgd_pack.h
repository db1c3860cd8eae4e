// fgd-pack: our strategy. FGD's fragmentation gradient, plus a consolidation key.
//
// Primary key: FGD's quantised score (fgd.h). Secondary: prefer the node that is already the
// most used, so equally fragmenting choices fill started nodes and keep empty ones whole for the
// large multi-GPU tasks that need them. Ties then go to the pool's tie order.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFgdPack) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {}  // namespace gpupool::placement
