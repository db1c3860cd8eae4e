// MIG layouts: how one GPU is carved into MIG instances, as a pure model (no I/O, no clock).
//
// The geometry is NVIDIA's (MIG User Guide, "Concepts" → "Partitioning", Figure "Profile
// Placements on A100", and "Getting Started with MIG" → "List GPU Instance Profiles",
// `nvidia-smi mig -lgipp`): a GPU has kMigMemorySlices (8) memory slices and kMigComputeSlices
// (7) compute slices; an instance of a profile occupies `memory_slices` contiguous memory slices
// beginning at one of the profile's allowed `starts`, and no two instances overlap. The profiles
// and their rules are the catalog's (pool/catalog.yaml: A100 40/80 GB, H100 80 GB, H200 141 GB);
// nothing here repeats a figure. On these GPUs the memory rule also keeps the compute slices
// within 7 (every maximal layout uses at most 7); ValidateMigLayout checks both anyway.
//
// A layout is a list of (profile, start) placements; its canonical form is sorted by start.
//
// The planner chooses one GPU's layout for a demand stated as instances wanted per profile
// (MigWant). Objective, for a layout L with c_p instances of profile p of g_p compute slices:
//
//     served(L) = Σ_p g_p × min(c_p, want_p)
//
// the compute slices of the wanted instances that L can run at once. Ties go to the layout with
// more compute slices in all (spare capacity still serves the next request), then fewer, larger
// instances (a spare 3g serves a 3g request, three spare 1g do not), then the first in
// EnumerateMaximalMigLayouts' order, so the choice is deterministic.
// Only maximal layouts (no further instance fits) are candidates: adding an instance never
// lowers served(). A demand stated as a mix (weights that sum to anything) becomes want by
// MigWantFromMix: each profile's share of compute × 7 slices / g_p instances.
//
// Thread safety: functions of values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "pool/catalog.h"

namespace gpupool {

struct MigPlacement {
  std::string profile;  // a profile name of the model, as the catalog spells it
  int start = 0;        // first memory slice

  friend bool operator==(const MigPlacement&, const MigPlacement&) = default;
};

using MigLayout = std::vector<MigPlacement>;

// Instances wanted per profile, in the order of model.mig_profiles (one entry each; ≥ 0).
using MigWant = std::vector<double>;

// OK, or INVALID_ARGUMENT naming the first problem: a profile the model does not have, a profile
// with no placement rule, a start the profile does not allow, two instances whose memory slices
// overlap, or compute slices beyond the GPU's 7. REQUIRES: nothing (any input is judged).
Status ValidateMigLayout(const GpuModel& model, const MigLayout& layout);

// Every layout of `model` to which no instance of a laid-out profile can be added, canonical
// (sorted by start), in a deterministic order (depth-first over starts, then profiles in
// catalog order). Empty when the model has no profile with a placement rule.
std::vector<MigLayout> EnumerateMaximalMigLayouts(const GpuModel& model);

// Instances per profile (model.mig_profiles order); profiles unknown to the model are skipped.
std::vector<int> MigInstanceCounts(const GpuModel& model, const MigLayout& layout);

// Σ_p g_p × min(c_p, want_p) for `counts` from MigInstanceCounts.
double MigServedSlices(const GpuModel& model, const std::vector<int>& counts, const MigWant& want);

// The want of one GPU for a mix: weight_p / Σ weight is profile p's share of the GPU's compute,
// so want_p = share_p × 7 / g_p. Unknown names → INVALID_ARGUMENT; an all-zero mix → all zero.
Result<MigWant> MigWantFromMix(const GpuModel& model,
                               const std::vector<std::pair<std::string, double>>& mix);

// The layout that maximises served() for `want` (see above); FAILED_PRECONDITION when the model
// has no profile with a placement rule, INVALID_ARGUMENT when `want` has the wrong length or a
// negative or non-finite entry.
Result<MigLayout> PlanMigLayout(const GpuModel& model, const MigWant& want);
// The same choice among `candidates` (EnumerateMaximalMigLayouts' result, computed once by a
// caller that plans often); FAILED_PRECONDITION when it is empty.
Result<MigLayout> PlanMigLayoutAmong(const GpuModel& model, const MigWant& want,
                                     const std::vector<MigLayout>& candidates);

// `profiles` placed in the order given, each at its lowest allowed start that overlaps nothing
// placed before (how a driver places instances created without a placement): the canonical
// layout, or INVALID_ARGUMENT naming the first profile that has no room left.
Result<MigLayout> PlaceMigProfiles(const GpuModel& model, const std::vector<std::string>& profiles);

// "4g.40gb@0+3g.40gb@4": placements as profile@start joined by '+', in canonical order.
std::string FormatMigLayout(const MigLayout& layout);
// The inverse, validated against `model`; "" is the empty layout.
Result<MigLayout> ParseMigLayout(const GpuModel& model, std::string_view text);

}  // namespace gpupool
