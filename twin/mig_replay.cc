#include "twin/mig_replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <queue>
#include <random>
#include <tuple>

#include "scheduler/mig_planner.h"

namespace gpupool::twin {
namespace {

constexpr int64_t kHourMs = 3'600'000;

// The six profile sizes of GA100/GH100 by (compute slices, memory slices), and each one's mean
// duration in minutes.
struct Shape {
  int compute;
  int memory;
  double mean_min;
};
constexpr Shape kShapes[] = {{1, 1, 10}, {1, 2, 20}, {2, 2, 30},
                             {3, 4, 60}, {4, 4, 90}, {7, 8, 180}};
constexpr size_t kShapeCount = std::size(kShapes);

// Share of the offered compute-slice-seconds per shape (kShapes order) by hour of day.
std::vector<double> MixAt(int64_t hour_of_day) {
  if (hour_of_day < 7) return {0.20, 0.05, 0.0, 0.15, 0.0, 0.60};    // night: training
  if (hour_of_day < 12) return {0.60, 0.10, 0.20, 0.10, 0.0, 0.0};   // morning: inference
  if (hour_of_day < 18) return {0.15, 0.05, 0.10, 0.40, 0.30, 0.0};  // afternoon: fine-tuning
  return {0.30, 0.05, 0.25, 0.20, 0.0, 0.20};                        // evening: a spread
}

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
double Exponential(std::mt19937_64& rng, double mean) { return -mean * std::log(1 - Uniform(rng)); }

int FindShape(const GpuModel& model, const Shape& s) {
  for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
    const MigProfile& p = model.mig_profiles[i];
    if (p.compute_slices == s.compute && p.memory_slices == s.memory) return static_cast<int>(i);
  }
  return -1;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The replay's state and event handlers.
class Replay {
 public:
  Replay(const GpuModel& model, const std::vector<MigRequest>& requests,
         const MigFleetPolicy& policy, const MigReplayOptions& o)
      : model_(model),
        reqs_(requests),
        policy_(policy),
        o_(o),
        end_ms_(o.hours * kHourMs),
        queues_(model.mig_profiles.size()),
        demand_(model.mig_profiles.size(), 0.0),
        running_(model.mig_profiles.size(), 0),
        start_ms_(requests.size(), -1),
        candidates_(EnumerateMaximalMigLayouts(model)) {
    for (const MigLayout& l : policy.layouts) gpus_.push_back(MakeGpu(l));
  }

  MigReplayResult Run() {
    size_t next = 0;
    if (policy_.dynamic) Push(o_.replan_every_s * 1000, kTick, 0, 0);
    while (true) {
      const int64_t t_arr = next < reqs_.size() ? reqs_[next].arrival_ms : end_ms_ + 1;
      const int64_t t_ev = events_.empty() ? end_ms_ + 1 : std::get<0>(events_.top());
      const int64_t t = std::min(t_arr, t_ev);
      if (t > end_ms_) break;
      Advance(t);
      if (t_ev <= t_arr) {
        auto [when, seq, kind, gpu, inst] = events_.top();
        events_.pop();
        Handle(kind, gpu, inst);
      } else {
        Arrive(next++);
      }
    }
    return Report();
  }

 private:
  enum Kind { kDone = 0, kRelaid = 1, kTick = 2 };
  struct Gpu {
    MigLayout layout;
    std::vector<int> profile;  // per instance
    std::vector<int64_t> req;  // per instance: the request running, -1 free
    int running = 0;
    bool relaying = false;
    int64_t changed_ms = -1;  // its last re-layout (scheduler planner's cooldown); -1 never
  };

  Gpu MakeGpu(const MigLayout& l) {
    Gpu g;
    SetLayout(g, l);
    return g;
  }
  void SetLayout(Gpu& g, const MigLayout& l) {
    g.layout = l;
    g.profile.clear();
    for (const MigPlacement& p : l) {
      for (size_t i = 0; i < model_.mig_profiles.size(); ++i) {
        if (model_.mig_profiles[i].name == p.profile) g.profile.push_back(static_cast<int>(i));
      }
    }
    g.req.assign(g.profile.size(), -1);
  }

  void Push(int64_t t, Kind k, size_t gpu, size_t inst) { events_.push({t, seq_++, k, gpu, inst}); }

  // Time-weighted exponential smoothing of (running + waiting) per profile.
  void Advance(int64_t t) {
    if (policy_.dynamic && t > now_) {
      const double a = 1 - std::exp(-static_cast<double>(t - now_) / (o_.mix_tau_s * 1000));
      for (size_t p = 0; p < demand_.size(); ++p) {
        const double x = running_[p] + static_cast<double>(queues_[p].size());
        demand_[p] += a * (x - demand_[p]);
      }
    }
    now_ = t;
  }

  // Starts request r on a free instance of its profile, busiest GPU first; false when none.
  bool TryStart(size_t r) {
    const int p = reqs_[r].profile;
    size_t best_gpu = gpus_.size(), best_inst = 0;
    for (size_t gi = 0; gi < gpus_.size(); ++gi) {
      const Gpu& g = gpus_[gi];
      if (g.relaying) continue;
      if (best_gpu < gpus_.size() && g.running <= gpus_[best_gpu].running) continue;
      for (size_t i = 0; i < g.profile.size(); ++i) {
        if (g.profile[i] == p && g.req[i] < 0) {
          best_gpu = gi;
          best_inst = i;
          break;
        }
      }
    }
    if (best_gpu == gpus_.size()) return false;
    Gpu& g = gpus_[best_gpu];
    g.req[best_inst] = static_cast<int64_t>(r);
    ++g.running;
    ++running_[static_cast<size_t>(p)];
    start_ms_[r] = now_;
    Push(now_ + reqs_[r].duration_ms, kDone, best_gpu, best_inst);
    return true;
  }

  void Arrive(size_t r) {
    if (!TryStart(r)) queues_[static_cast<size_t>(reqs_[r].profile)].push_back(r);
  }

  // Waiting requests, oldest first across profiles, onto whatever is free.
  void ServeQueues() {
    std::vector<size_t> order;
    for (size_t p = 0; p < queues_.size(); ++p) {
      if (!queues_[p].empty()) order.push_back(p);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return queues_[a].front() < queues_[b].front(); });
    for (size_t p : order) {
      while (!queues_[p].empty() && TryStart(queues_[p].front())) queues_[p].pop_front();
    }
  }

  void Handle(Kind kind, size_t gi, size_t inst) {
    if (kind == kTick) {
      if (policy_.scheduler_planner) {
        PlanAsScheduler();
      } else {
        for (size_t i = 0; i < gpus_.size(); ++i) MaybeRelayout(i);
      }
      Push(now_ + o_.replan_every_s * 1000, kTick, 0, 0);
      return;
    }
    Gpu& g = gpus_[gi];
    if (kind == kRelaid) {
      g.relaying = false;
      ServeQueues();
      return;
    }
    const size_t r = static_cast<size_t>(g.req[inst]);
    g.req[inst] = -1;
    --g.running;
    --running_[static_cast<size_t>(reqs_[r].profile)];
    ServeQueues();
    if (policy_.dynamic && g.running == 0) MaybeRelayout(gi);
  }

  // gpupoold's planner over the whole fleet: the requests waiting now are the demand, the
  // smoothed demand the learned mix.
  void PlanAsScheduler() {
    MigPlanInput in;
    in.policy = MigRelayout::kIdle;
    in.now_us = now_ * 1000;
    in.cooldown_us = static_cast<int64_t>(policy_.scheduler_cooldown_s * 1e6);
    for (size_t p = 0; p < queues_.size(); ++p) {
      const std::string& name = model_.mig_profiles[p].name;
      if (!queues_[p].empty()) in.waiting[name] = static_cast<int32_t>(queues_[p].size());
      if (demand_[p] > 0) in.mix.emplace_back(name, demand_[p]);
    }
    if (in.waiting.empty()) return;
    for (size_t gi = 0; gi < gpus_.size(); ++gi) {
      const Gpu& g = gpus_[gi];
      if (g.relaying) continue;
      in.gpus.push_back(MigGpu{"twin", std::to_string(gi), &model_, g.layout, g.running,
                               g.changed_ms < 0 ? 0 : g.changed_ms * 1000 + 1});
    }
    for (const MigRelayoutChoice& c : PlanMigRelayouts(in)) {
      const size_t gi = std::stoul(c.gpu);
      Gpu& g = gpus_[gi];
      SetLayout(g, c.layout);
      g.relaying = true;
      g.changed_ms = now_;
      ++relayouts_;
      Push(now_ + static_cast<int64_t>(o_.relayout_s * 1000), kRelaid, gi, 0);
    }
  }

  void MaybeRelayout(size_t gi) {
    if (policy_.scheduler_planner) return PlanAsScheduler();
    Gpu& g = gpus_[gi];
    if (!policy_.dynamic || g.running > 0 || g.relaying) return;
    // The fleet's want, scaled to its compute, less what the other GPUs supply.
    MigWant want = demand_;
    double asked = 0;
    for (size_t p = 0; p < want.size(); ++p)
      asked += want[p] * model_.mig_profiles[p].compute_slices;
    const double fleet = static_cast<double>(kMigComputeSlices) * static_cast<double>(gpus_.size());
    if (asked > fleet) {
      for (double& w : want) w *= fleet / asked;
    }
    for (size_t other = 0; other < gpus_.size(); ++other) {
      if (other == gi) continue;
      for (int p : gpus_[other].profile) want[static_cast<size_t>(p)] -= 1;
    }
    for (double& w : want) w = std::max(0.0, w);
    auto plan = PlanMigLayoutAmong(model_, want, candidates_);
    if (!plan.ok()) return;
    const double now_served = MigServedSlices(model_, MigInstanceCounts(model_, g.layout), want);
    const double new_served = MigServedSlices(model_, MigInstanceCounts(model_, *plan), want);
    if (new_served < now_served + o_.min_gain_slices) return;
    SetLayout(g, *plan);
    g.relaying = true;
    ++relayouts_;
    Push(now_ + static_cast<int64_t>(o_.relayout_s * 1000), kRelaid, gi, 0);
  }

  MigReplayResult Report() {
    MigReplayResult out;
    out.policy = policy_.name;
    out.requests = static_cast<int64_t>(reqs_.size());
    out.relayouts = relayouts_;
    std::vector<double> waits;
    waits.reserve(reqs_.size());
    for (size_t r = 0; r < reqs_.size(); ++r) {
      const MigRequest& q = reqs_[r];
      const double g = model_.mig_profiles[static_cast<size_t>(q.profile)].compute_slices;
      const double asked = static_cast<double>(std::min(q.duration_ms, end_ms_ - q.arrival_ms));
      out.requested_instance_s += asked / 1000;
      out.requested_slice_s += g * asked / 1000;
      if (start_ms_[r] >= 0) {
        ++out.started;
        const double ran =
            static_cast<double>(std::min(q.duration_ms, end_ms_ - start_ms_[r])) / 1000;
        out.placed_instance_s += ran;
        out.placed_slice_s += g * ran;
        waits.push_back(static_cast<double>(start_ms_[r] - q.arrival_ms) / 1000);
      } else {
        waits.push_back(static_cast<double>(end_ms_ - q.arrival_ms) / 1000);
      }
    }
    out.wait_p50_s = Percentile(waits, 0.50);
    out.wait_p99_s = Percentile(waits, 0.99);
    return out;
  }

  const GpuModel& model_;
  const std::vector<MigRequest>& reqs_;
  const MigFleetPolicy& policy_;
  const MigReplayOptions& o_;
  const int64_t end_ms_;
  std::vector<Gpu> gpus_;
  std::vector<std::deque<size_t>> queues_;  // per profile, request indices in arrival order
  std::vector<double> demand_;              // smoothed running + waiting per profile
  std::vector<int> running_;
  std::vector<int64_t> start_ms_;  // per request; -1 never started
  const std::vector<MigLayout> candidates_;
  int64_t now_ = 0;
  int64_t relayouts_ = 0;
  uint64_t seq_ = 0;
  using Event = std::tuple<int64_t, uint64_t, Kind, size_t, size_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
};

Status CheckOptions(const MigReplayOptions& o) {
  if (o.gpus < 1 || o.gpus > 100'000) return Status::InvalidArgument("--gpus must be 1..100000");
  if (o.hours < 1 || o.hours > 24 * 31) return Status::InvalidArgument("--hours must be 1..744");
  if (!(o.load > 0) || o.load > 10) return Status::InvalidArgument("--load must be in (0, 10]");
  if (!(o.relayout_s >= 0) || o.relayout_s > 3600) {
    return Status::InvalidArgument("--relayout-s must be 0..3600");
  }
  if (o.replan_every_s < 1) return Status::InvalidArgument("--replan-min must be positive");
  if (!(o.mix_tau_s > 0)) return Status::InvalidArgument("--mix-tau-min must be positive");
  return Status::Ok();
}

}  // namespace

Result<std::vector<MigRequest>> MigShiftingDay(const GpuModel& model,
                                               const MigReplayOptions& options) {
  GPUPOOL_RETURN_IF_ERROR(CheckOptions(options));
  int profile[kShapeCount];
  for (size_t s = 0; s < kShapeCount; ++s) {
    profile[s] = FindShape(model, kShapes[s]);
    if (profile[s] < 0) {
      return Status::FailedPrecondition(
          model.name + " has no MIG profile of " + std::to_string(kShapes[s].compute) +
          " compute and " + std::to_string(kShapes[s].memory) +
          " memory slices with a placement rule (the shifting day needs A100, H100 or H200)");
    }
  }
  std::mt19937_64 rng(options.seed);
  std::vector<MigRequest> out;
  const double fleet_slices = static_cast<double>(kMigComputeSlices) * options.gpus;
  for (int64_t h = 0; h < options.hours; ++h) {
    const std::vector<double> mix = MixAt(h % 24);
    for (size_t s = 0; s < kShapeCount; ++s) {
      if (mix[s] <= 0) continue;
      const double mean_s = kShapes[s].mean_min * 60;
      // λ × g × E[d] = load × fleet × share.
      const double rate = options.load * fleet_slices * mix[s] / (kShapes[s].compute * mean_s);
      double t = static_cast<double>(h) * 3600 + Exponential(rng, 1 / rate);
      while (t < static_cast<double>(h + 1) * 3600) {
        const double d = std::max(60.0, Exponential(rng, mean_s));
        out.push_back({static_cast<int64_t>(t * 1000), profile[s], static_cast<int64_t>(d * 1000)});
        t += Exponential(rng, 1 / rate);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const MigRequest& a, const MigRequest& b) {
    return a.arrival_ms < b.arrival_ms;
  });
  return out;
}

MigFleetPolicy UniformStaticFleet(const MigLayout& layout, int32_t gpus) {
  return {"static " + FormatMigLayout(layout),
          std::vector<MigLayout>(static_cast<size_t>(gpus), layout), false, false, 0};
}

Result<std::vector<MigLayout>> PlanMigFleet(const GpuModel& model, const MigWant& want,
                                            int32_t gpus) {
  MigWant left = want;
  double asked = 0;
  for (size_t p = 0; p < left.size() && p < model.mig_profiles.size(); ++p) {
    asked += left[p] * model.mig_profiles[p].compute_slices;
  }
  const double fleet = static_cast<double>(kMigComputeSlices) * gpus;
  if (asked > fleet) {
    for (double& w : left) w *= fleet / asked;
  }
  const std::vector<MigLayout> candidates = EnumerateMaximalMigLayouts(model);
  std::vector<MigLayout> out;
  for (int32_t i = 0; i < gpus; ++i) {
    GPUPOOL_ASSIGN_OR_RETURN(MigLayout l, PlanMigLayoutAmong(model, left, candidates));
    const std::vector<int> counts = MigInstanceCounts(model, l);
    for (size_t p = 0; p < left.size(); ++p) left[p] = std::max(0.0, left[p] - counts[p]);
    out.push_back(std::move(l));
  }
  return out;
}

Result<MigFleetPolicy> DynamicMigFleet(const GpuModel& model, int32_t gpus) {
  std::vector<std::pair<std::string, double>> even;
  for (const MigProfile& p : model.mig_profiles) {
    if (p.memory_slices > 0) even.emplace_back(p.name, 1.0);
  }
  GPUPOOL_ASSIGN_OR_RETURN(MigWant want, MigWantFromMix(model, even));
  for (double& w : want) w *= gpus;
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<MigLayout> layouts, PlanMigFleet(model, want, gpus));
  return MigFleetPolicy{"dynamic", std::move(layouts), true, false, 0};
}

Result<MigFleetPolicy> SchedulerMigFleet(const GpuModel& model, int32_t gpus) {
  GPUPOOL_ASSIGN_OR_RETURN(MigFleetPolicy p, DynamicMigFleet(model, gpus));
  p.name = "dynamic (gpupoold's planner)";
  p.scheduler_planner = true;
  p.scheduler_cooldown_s = 30;  // SchedulerOptions::mig_relayout_cooldown_ms
  return p;
}

MigWant MeanDemand(const GpuModel& model, const std::vector<MigRequest>& requests, int64_t hours) {
  MigWant want(model.mig_profiles.size(), 0.0);
  const int64_t end_ms = hours * kHourMs;
  for (const MigRequest& r : requests) {
    want[static_cast<size_t>(r.profile)] +=
        static_cast<double>(std::min(r.duration_ms, end_ms - r.arrival_ms));
  }
  for (double& w : want) w /= static_cast<double>(end_ms);
  return want;
}

Result<MigReplayResult> ReplayMig(const GpuModel& model, const std::vector<MigRequest>& requests,
                                  const MigFleetPolicy& policy, const MigReplayOptions& options) {
  GPUPOOL_RETURN_IF_ERROR(CheckOptions(options));
  if (policy.layouts.size() != static_cast<size_t>(options.gpus)) {
    return Status::InvalidArgument("policy " + policy.name + " lays out " +
                                   std::to_string(policy.layouts.size()) + " GPUs, not " +
                                   std::to_string(options.gpus));
  }
  for (const MigLayout& l : policy.layouts) {
    GPUPOOL_RETURN_IF_ERROR(ValidateMigLayout(model, l));
  }
  for (const MigRequest& r : requests) {
    if (r.profile < 0 || static_cast<size_t>(r.profile) >= model.mig_profiles.size() ||
        r.duration_ms <= 0 || r.arrival_ms < 0) {
      return Status::InvalidArgument("a request names no profile of " + model.name +
                                     " or has no duration");
    }
  }
  return Replay(model, requests, policy, options).Run();
}

}  // namespace gpupool::twin
