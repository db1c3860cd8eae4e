// SharePatterns: which free shares of a GPU are worth leaving, given the workload's GPU-share
// sizes — the "expected final waste" of a device that has r milli-GPU free.
//
// The workload's share tasks (one GPU, less than a whole one), in proportion to their weights,
// are packed offline by first-fit decreasing; each resulting device content is a pattern
// ({470, 470}, {650, 320}, {810}, …) with a multiplicity. Every sub-multiset S of a pattern P is
// a state a device passes through on the way to P, with 1000 − ΣS free; waste[r] is the mean of
// 1000 − ΣP over all (P, S) that leave r free, weighted by multiplicity, and r itself where no
// pattern passes (nothing typical completes it). A fresh device is state 1000, waste 0.
//
// fgd-pack adds waste[after] − waste[before] for the devices a placement changes: a share goes
// where it completes a typical pattern (a 320 next to a 650, a 470 next to a 470), not where it
// leaves a gap no common size fills (a 320 next to a 470 leaves 210). Rare sizes count only as
// far as the packing uses them: 160s fill the gaps of 810s, so they do not make a 210 gap
// fillable. Online bin packing with item sizes from a known discrete distribution is the setting
// of Csirik et al., "On the sum-of-squares algorithm for bin packing" (JACM 2006).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/plugin.h"

namespace gpupool::placement {

inline constexpr int32_t kShareStates = 1001;  // free share 0…1000 milli

// waste[r] for r = 0…1000 (above). Empty when the workload has no share class.
// `scale`: how many share tasks the offline packing draws (more: finer multiplicities).
std::vector<double> ShareWaste(const std::vector<FragClass>& workload, int scale = 4000);

}  // namespace gpupool::placement
