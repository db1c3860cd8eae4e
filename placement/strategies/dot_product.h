// dot-product: the node whose free (CPU, GPU) vector is least aligned with the request, as FGD's
// artifact scores it: int(100 × (1 − ½ (cpu_free/128000 · cpu_req/128000 + gpu_free/8000 ·
// gpu_req/8000))), higher wins; the integer cut makes many ties, which the tie order decides.
// Devices: best fit inside the node.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kDotProduct) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"

namespace gpupool::placement {

int64_t DotProductScore(int64_t cpu_free, int64_t cpu_req, int64_t gpu_free_milli,
                        int64_t gpu_req_milli);

}  // namespace gpupool::placement
