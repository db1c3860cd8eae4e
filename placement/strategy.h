// Strategy: the typed name of a placement strategy, and the one registry that lists them.
//
// Config names a strategy by string once, at the edge (ParseStrategy); everything after holds the
// enum, so no hot loop ever compares strings. Each strategy is one plugin (one file pair under
// placement/strategies/); plugin.h maps the enum to its implementation.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace gpupool::placement {

enum class Strategy : uint8_t {
  kFirstFit,       // the first node (tie order) that fits
  kBestFit,        // least CPU + GPU left over (min–max normalised, as FGD's artifact)
  kSpread,         // most GPU left free: spreads load, keeps failure domains small
  kDotProduct,     // least aligned free vector with the request
  kGpuPacking,     // reuse partly used GPUs, then used nodes, then small empty nodes
  kGpuClustering,  // keep tasks of one GPU-count kind together
  kFgd,            // fragmentation gradient descent (Weng et al., ATC '23)
  kFgdPack,        // ours: FGD with a consolidation key and a lookahead on class demand
  kRandom,         // a feasible node uniformly at random (seeded)
};

// Every strategy, in registry order.
std::span<const Strategy> AllStrategies();
// The config name: "first-fit", "best-fit", "spread", "dot-product", "gpu-packing",
// "gpu-clustering", "fgd", "fgd-pack", "random".
std::string_view StrategyName(Strategy s);
// Parses a config name; the error lists the known names.
Result<Strategy> ParseStrategy(std::string_view name);

}  // namespace gpupool::placement
