#include "pool/mig_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace gpupool {
namespace {

// Bits [start, start + size) of the 8 memory slices.
unsigned SliceMask(int start, int size) { return ((1u << size) - 1u) << start; }

int ProfileIndex(const GpuModel& model, std::string_view name) {
  for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
    if (model.mig_profiles[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Describe(const MigPlacement& p) { return p.profile + "@" + std::to_string(p.start); }

void SortCanonical(MigLayout& layout) {
  std::sort(layout.begin(), layout.end(), [](const MigPlacement& a, const MigPlacement& b) {
    return a.start != b.start ? a.start < b.start : a.profile < b.profile;
  });
}

struct Candidate {
  int profile = 0;
  int start = 0;
  unsigned mask = 0;
};

// Every (profile, start) the model allows, ordered by start, then catalog order.
std::vector<Candidate> Candidates(const GpuModel& model) {
  std::vector<Candidate> out;
  for (int start = 0; start < kMigMemorySlices; ++start) {
    for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
      const MigProfile& p = model.mig_profiles[i];
      if (p.memory_slices <= 0) continue;
      if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) continue;
      out.push_back({static_cast<int>(i), start, SliceMask(start, p.memory_slices)});
    }
  }
  return out;
}

// Depth-first: candidate i is taken (when it fits) or left; a leaf is kept when maximal.
void Enumerate(const GpuModel& model, const std::vector<Candidate>& cands, size_t i, unsigned used,
               int compute, std::vector<size_t>& taken, std::vector<MigLayout>& out) {
  if (i == cands.size()) {
    for (const Candidate& c : cands) {
      const int g = model.mig_profiles[static_cast<size_t>(c.profile)].compute_slices;
      if ((c.mask & used) == 0 && compute + g <= kMigComputeSlices) return;  // not maximal
    }
    MigLayout layout;
    for (size_t k : taken) {
      layout.push_back(
          {model.mig_profiles[static_cast<size_t>(cands[k].profile)].name, cands[k].start});
    }
    out.push_back(std::move(layout));
    return;
  }
  const Candidate& c = cands[i];
  const int g = model.mig_profiles[static_cast<size_t>(c.profile)].compute_slices;
  if ((c.mask & used) == 0 && compute + g <= kMigComputeSlices) {
    taken.push_back(i);
    Enumerate(model, cands, i + 1, used | c.mask, compute + g, taken, out);
    taken.pop_back();
  }
  Enumerate(model, cands, i + 1, used, compute, taken, out);
}

}  // namespace

Status ValidateMigLayout(const GpuModel& model, const MigLayout& layout) {
  unsigned used = 0;
  int compute = 0;
  std::vector<const MigPlacement*> owner(kMigMemorySlices, nullptr);
  for (const MigPlacement& pl : layout) {
    const int idx = ProfileIndex(model, pl.profile);
    if (idx < 0) {
      std::string names;
      for (const MigProfile& p : model.mig_profiles) names += (names.empty() ? "" : ", ") + p.name;
      return Status::InvalidArgument("MIG layout of " + model.name + ": " + Describe(pl) + ": '" +
                                     pl.profile + "' is not a MIG profile of " + model.name +
                                     " (it has: " + (names.empty() ? "none" : names) + ")");
    }
    const MigProfile& p = model.mig_profiles[static_cast<size_t>(idx)];
    if (p.memory_slices <= 0) {
      return Status::InvalidArgument("MIG layout of " + model.name + ": " + Describe(pl) +
                                     ": the catalog states no placement rule for " + p.name);
    }
    if (std::find(p.starts.begin(), p.starts.end(), pl.start) == p.starts.end()) {
      std::string starts;
      for (int s : p.starts) starts += (starts.empty() ? "" : ",") + std::to_string(s);
      return Status::InvalidArgument("MIG layout of " + model.name + ": " + Describe(pl) + ": " +
                                     p.name + " may start only at memory slice {" + starts + "}");
    }
    const unsigned mask = SliceMask(pl.start, p.memory_slices);
    if ((mask & used) != 0) {
      int slice = pl.start;
      while ((SliceMask(slice, 1) & used) == 0) ++slice;
      return Status::InvalidArgument("MIG layout of " + model.name + ": " + Describe(pl) +
                                     " (memory slices " + std::to_string(pl.start) + "-" +
                                     std::to_string(pl.start + p.memory_slices - 1) +
                                     ") overlaps " + Describe(*owner[static_cast<size_t>(slice)]) +
                                     " at memory slice " + std::to_string(slice));
    }
    used |= mask;
    for (int s = pl.start; s < pl.start + p.memory_slices; ++s) {
      owner[static_cast<size_t>(s)] = &pl;
    }
    compute += p.compute_slices;
    if (compute > kMigComputeSlices) {
      return Status::InvalidArgument("MIG layout of " + model.name + ": " + Describe(pl) +
                                     " brings the compute slices to " + std::to_string(compute) +
                                     ", more than the GPU's " + std::to_string(kMigComputeSlices));
    }
  }
  return Status::Ok();
}

std::vector<MigLayout> EnumerateMaximalMigLayouts(const GpuModel& model) {
  const std::vector<Candidate> cands = Candidates(model);
  std::vector<MigLayout> out;
  if (cands.empty()) return out;
  std::vector<size_t> taken;
  Enumerate(model, cands, 0, 0, 0, taken, out);
  for (MigLayout& l : out) SortCanonical(l);
  return out;
}

std::vector<int> MigInstanceCounts(const GpuModel& model, const MigLayout& layout) {
  std::vector<int> counts(model.mig_profiles.size(), 0);
  for (const MigPlacement& pl : layout) {
    const int idx = ProfileIndex(model, pl.profile);
    if (idx >= 0) ++counts[static_cast<size_t>(idx)];
  }
  return counts;
}

double MigServedSlices(const GpuModel& model, const std::vector<int>& counts, const MigWant& want) {
  double served = 0;
  for (size_t i = 0; i < model.mig_profiles.size() && i < counts.size() && i < want.size(); ++i) {
    served += model.mig_profiles[i].compute_slices * std::min<double>(counts[i], want[i]);
  }
  return served;
}

Result<MigWant> MigWantFromMix(const GpuModel& model,
                               const std::vector<std::pair<std::string, double>>& mix) {
  MigWant want(model.mig_profiles.size(), 0.0);
  double total = 0;
  for (const auto& [name, weight] : mix) {
    const int idx = ProfileIndex(model, name);
    if (idx < 0) {
      return Status::InvalidArgument("'" + name + "' is not a MIG profile of " + model.name);
    }
    if (!(weight >= 0) || !std::isfinite(weight)) {
      return Status::InvalidArgument("weight of " + name + " must be a finite number ≥ 0");
    }
    want[static_cast<size_t>(idx)] += weight;
    total += weight;
  }
  if (total <= 0) return want;
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = want[i] / total * kMigComputeSlices / model.mig_profiles[i].compute_slices;
  }
  return want;
}

Result<MigLayout> PlanMigLayout(const GpuModel& model, const MigWant& want) {
  return PlanMigLayoutAmong(model, want, EnumerateMaximalMigLayouts(model));
}

Result<MigLayout> PlanMigLayoutAmong(const GpuModel& model, const MigWant& want,
                                     const std::vector<MigLayout>& layouts) {
  if (want.size() != model.mig_profiles.size()) {
    return Status::InvalidArgument("MIG want has " + std::to_string(want.size()) + " entries; " +
                                   model.name + " has " +
                                   std::to_string(model.mig_profiles.size()) + " profiles");
  }
  for (double w : want) {
    if (!(w >= 0) || !std::isfinite(w)) {
      return Status::InvalidArgument("MIG want entries must be finite numbers ≥ 0");
    }
  }
  if (layouts.empty()) {
    return Status::FailedPrecondition(model.name + " has no MIG profile with a placement rule");
  }
  const MigLayout* best = nullptr;
  double best_served = -1;
  int best_compute = -1;
  size_t best_instances = 0;
  for (const MigLayout& l : layouts) {
    const std::vector<int> counts = MigInstanceCounts(model, l);
    const double served = MigServedSlices(model, counts, want);
    int compute = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      compute += counts[i] * model.mig_profiles[i].compute_slices;
    }
    constexpr double kEps = 1e-9;
    const bool better =
        served > best_served + kEps ||
        (served > best_served - kEps &&
         (compute > best_compute || (compute == best_compute && l.size() < best_instances)));
    if (better) {
      best = &l;
      best_served = served;
      best_compute = compute;
      best_instances = l.size();
    }
  }
  return *best;
}

std::string FormatMigLayout(const MigLayout& layout) {
  MigLayout sorted = layout;
  SortCanonical(sorted);
  std::string out;
  for (const MigPlacement& p : sorted) out += (out.empty() ? "" : "+") + Describe(p);
  return out;
}

Result<MigLayout> PlaceMigProfiles(const GpuModel& model,
                                   const std::vector<std::string>& profiles) {
  MigLayout layout;
  for (const std::string& name : profiles) {
    const int idx = ProfileIndex(model, name);
    // An unknown profile, or one without a placement rule: ValidateMigLayout names which.
    if (idx < 0 || model.mig_profiles[static_cast<size_t>(idx)].starts.empty())
      return ValidateMigLayout(model, {{name, 0}});
    const MigProfile& p = model.mig_profiles[static_cast<size_t>(idx)];
    bool placed = false;
    for (int start : p.starts) {
      layout.push_back({name, start});
      if (ValidateMigLayout(model, layout).ok()) {
        placed = true;
        break;
      }
      layout.pop_back();
    }
    if (!placed) {
      return Status::InvalidArgument("MIG layout of " + model.name + ": no room left for " + name +
                                     " after " + FormatMigLayout(layout));
    }
  }
  SortCanonical(layout);
  return layout;
}

Result<MigLayout> ParseMigLayout(const GpuModel& model, std::string_view text) {
  MigLayout layout;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('+', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string item(text.substr(pos, end - pos));
    const size_t at = item.find('@');
    char* num_end = nullptr;
    const long start =
        at == std::string::npos ? -1 : std::strtol(item.c_str() + at + 1, &num_end, 10);
    if (at == std::string::npos || at == 0 || num_end == item.c_str() + at + 1 ||
        *num_end != '\0' || start < 0 || start >= kMigMemorySlices) {
      return Status::InvalidArgument("MIG layout '" + std::string(text) + "': '" + item +
                                     "' is not PROFILE@START (START a memory slice 0-7)");
    }
    layout.push_back({item.substr(0, at), static_cast<int>(start)});
    pos = end + 1;
  }
  GPUPOOL_RETURN_IF_ERROR(ValidateMigLayout(model, layout));
  SortCanonical(layout);
  return layout;
}

}  // namespace gpupool
