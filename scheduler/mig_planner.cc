#include "scheduler/mig_planner.h"

#include <algorithm>
#include <tuple>

namespace gpupool {
namespace {

MigWant WaitingWant(const GpuModel& model, const std::map<std::string, int32_t>& unmet) {
  MigWant want(model.mig_profiles.size(), 0.0);
  for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
    auto it = unmet.find(model.mig_profiles[i].name);
    if (it != unmet.end()) want[i] = std::max<int32_t>(0, it->second);
  }
  return want;
}

MigWant MixWant(const GpuModel& model, const std::vector<std::pair<std::string, double>>& mix) {
  std::vector<std::pair<std::string, double>> known;
  for (const auto& [profile, weight] : mix) {
    if (model.FindMig(profile) != nullptr && weight > 0) known.emplace_back(profile, weight);
  }
  Result<MigWant> want = MigWantFromMix(model, known);
  return want.ok() ? *want : MigWant(model.mig_profiles.size(), 0.0);
}

struct Candidate {
  MigLayout layout;
  double gain = 0;  // waiting slices served beyond the current layout
};

class Planner {
 public:
  explicit Planner(const MigPlanInput& in) : in_(in), unmet_(in.waiting) {}

  bool Unmet() const {
    return std::any_of(unmet_.begin(), unmet_.end(), [](const auto& e) { return e.second > 0; });
  }

  bool Cooled(const MigGpu& g) const {
    return g.last_change_us == 0 || in_.now_us - g.last_change_us >= in_.cooldown_us;
  }

  // The layout that serves the most of what still waits and, among those, the most of the
  // learned mix (then pool/mig_layout.h's tie-breaks); and by how much it beats the current.
  Candidate Best(const MigGpu& g) {
    const GpuModel& model = *g.model;
    const MigWant waiting = WaitingWant(model, unmet_);
    auto [at, fresh] = maximal_.try_emplace(model.name);
    if (fresh) at->second = EnumerateMaximalMigLayouts(model);
    double most = -1;
    std::vector<MigLayout> best;
    for (const MigLayout& l : at->second) {
      const double served = MigServedSlices(model, MigInstanceCounts(model, l), waiting);
      if (served > most + 1e-9) {
        most = served;
        best.clear();
      }
      if (served > most - 1e-9) best.push_back(l);
    }
    Result<MigLayout> plan = PlanMigLayoutAmong(model, MixWant(model, in_.mix), best);
    if (!plan.ok()) return {};
    const double now = MigServedSlices(model, MigInstanceCounts(model, g.current), waiting);
    return {*plan, most - now};
  }

  // Takes what `layout` serves off the demand; returns it as "2 × 3g.40gb, 1 × 1g.10gb".
  std::string Serve(const GpuModel& model, const MigLayout& layout) {
    const std::vector<int> counts = MigInstanceCounts(model, layout);
    std::string served;
    for (size_t i = 0; i < counts.size(); ++i) {
      auto it = unmet_.find(model.mig_profiles[i].name);
      if (it == unmet_.end() || it->second <= 0 || counts[i] <= 0) continue;
      const int32_t n = std::min<int32_t>(it->second, counts[i]);
      it->second -= n;
      if (!served.empty()) served += ", ";
      served += std::to_string(n) + " × " + it->first;
    }
    return served;
  }

 private:
  const MigPlanInput& in_;
  std::map<std::string, int32_t> unmet_;
  std::map<std::string, std::vector<MigLayout>> maximal_;
};

}  // namespace

std::vector<MigRelayoutChoice> PlanMigRelayouts(const MigPlanInput& in) {
  std::vector<MigRelayoutChoice> out;
  if (in.policy == MigRelayout::kOff) return out;
  Planner planner(in);
  std::vector<const MigGpu*> gpus;
  for (const MigGpu& g : in.gpus) {
    if (g.model != nullptr && planner.Cooled(g)) gpus.push_back(&g);
  }
  std::sort(gpus.begin(), gpus.end(), [](const MigGpu* a, const MigGpu* b) {
    return std::tie(a->node, a->gpu) < std::tie(b->node, b->gpu);
  });
  for (const MigGpu* g : gpus) {
    if (!planner.Unmet()) return out;
    if (g->busy_instances > 0) continue;
    Candidate c = planner.Best(*g);
    if (c.gain <= 0) continue;
    std::string served = planner.Serve(*g->model, c.layout);
    out.push_back(
        {g->node, g->gpu, std::move(c.layout), false, "for waiting MIG work (" + served + ")"});
  }
  if (in.policy != MigRelayout::kDrain || !planner.Unmet()) return out;
  // One busy GPU at a time: the fewest tasks to wait for, then the larger gain.
  const MigGpu* pick = nullptr;
  Candidate best;
  for (const MigGpu* g : gpus) {
    if (g->busy_instances == 0) continue;
    Candidate c = planner.Best(*g);
    if (c.gain <= 0) continue;
    if (pick == nullptr || g->busy_instances < pick->busy_instances ||
        (g->busy_instances == pick->busy_instances && c.gain > best.gain)) {
      pick = g;
      best = std::move(c);
    }
  }
  if (pick != nullptr) {
    std::string served = planner.Serve(*pick->model, best.layout);
    out.push_back({pick->node, pick->gpu, std::move(best.layout), true,
                   "drained for waiting MIG work (" + served + "); " +
                       std::to_string(pick->busy_instances) + " running instance(s) finish first"});
  }
  return out;
}

}  // namespace gpupool
