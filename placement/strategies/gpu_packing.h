// gpu-packing: fill partly used GPUs first, then free GPUs of nodes already in use, then the
// smallest empty node — as FGD's artifact scores it (higher wins):
//   a share on a partly used GPU:  100 − free% of that GPU / 10, at least 50;
//   free GPUs on a node in use:    50 − GPUs consumed, at least 33;
//   an empty node:                 33 − GPUs on the node.
// A node is "in use" when any of its GPUs has an allocation. CPU-only tasks score 0 everywhere
// (the tie order decides), as in the artifact.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kGpuPacking) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

int64_t GpuPackingScore(const NodeState& node, const CompiledRequest& req,
                        const DeviceSet& candidates, DeviceSet* chosen);

}  // namespace gpupool::placement
