// WorkloadModel: a pool's request mix, learned online from what is submitted.
//
// A class is a request shape without its host memory: kind, share or per-device amount, device
// count, allowed models, MIG profile, CPU. Each class carries a weight (tasks seen, decayed) and
// the decayed mean of its tasks' host memory. Decay is per task observed, not per second (no
// clock here): observing c tasks multiplies every weight by λ^c, λ = 2^(−1/half_life), then adds
// c to the observed class. So after half_life more tasks a class never seen again weighs half.
// Stored weights are s_i = w_i · λ^(−N) (N = tasks observed so far): an observation touches one
// class, not all; the scale is folded back into s_i before λ^(−N) grows past 2^200.
//
// Prior: before anything is seen the model holds PriorClasses() (¼, ½, ¾ shares; 1, 2, 4, 8
// whole GPUs) with prior_weight tasks in all, observed at N = 0 — they decay like any class, so
// observations take over smoothly (at N = prior_weight tasks the prior is about half the mass).
// Once the prior weighs under 1/32 of the total it is left out of Classes(): a never-seen 8-GPU
// class must not keep steering a pool that runs only shares. At most max_classes classes are
// kept: a new class beyond that evicts the lightest one, whose weight is folded into the nearest
// kept class of the same kind, device count, models and MIG profile (nearest share, then
// per-device amount, then CPU) — so a pool with more shapes than the cap keeps each model set's
// share of the demand; without such a class it is dropped.
//
// Pure: no I/O, no clock, deterministic (the same observations in the same order give the same
// doubles, so the daemon and gpupool-sim compute identical models). Thread safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "placement/placement.h"

namespace gpupool::placement {

struct WorkloadModelOptions {
  double half_life_tasks = 8192;  // a class unseen for this many tasks weighs half; ≤ 0: no decay
  double prior_weight = 16;       // pseudo-tasks of the prior at N = 0
  size_t max_classes = 256;
};

// One class as the model reports it: the shape (memory = the class's mean), its weight in
// decayed tasks and its share of the model's total weight.
struct LearnedClass {
  Request shape;
  double weight = 0;
  double share = 0;
  bool prior = false;  // one of the prior's classes, not yet observed
  uint64_t id = 0;     // unique while the class stays in the model (its first-seen sequence)
};

class WorkloadModel {
 public:
  explicit WorkloadModel(WorkloadModelOptions options = {});

  // Records `count` tasks of shape `r` (count ≤ 0 is ignored).
  void Observe(const Request& r, int64_t count = 1);

  // Classes by weight, heaviest first (ties: the earlier-seen class first), until they cover
  // `coverage` of the total weight (1 = all). The prior's classes are included while they weigh.
  std::vector<LearnedClass> Classes(double coverage = 1.0) const;
  // The same as WorkloadClass values for Engine::SetWorkload.
  std::vector<WorkloadClass> ForEngine(double coverage = 1.0) const;

  int64_t tasks_observed() const { return observed_; }
  // Σ weights of the observed classes, and of the prior, at the current N.
  double observed_weight() const;
  double prior_weight() const;
  const WorkloadModelOptions& options() const { return options_; }

  // The prior's shapes: ¼, ½, ¾ of a GPU (1 core, 4 GiB each) and 1, 2, 4, 8 whole GPUs (8, 16,
  // 32, 64 cores; 32 GiB per GPU), equal weights.
  static std::vector<Request> PriorClasses();

 private:
  // The class identity: every request field except host memory. Models sorted.
  using Key =
      std::tuple<RequestKind, int32_t, int64_t, int64_t, int, std::string, std::string, int64_t>;
  struct Entry {
    double scaled = 0;  // s_i = w_i · λ^(−N)
    double scaled_mem = 0;  // Σ c · memory · λ^(−n) at each observation n: mean = scaled_mem/scaled
    uint64_t first_seen = 0;
    bool prior = false;
    Request shape;
  };
  static Key KeyOf(const Request& r);
  static double FoldDistance(const Key& a, const Key& b);
  void Evict();
  void Add(const Request& r, double count, bool prior);
  void Renormalise();
  double Now() const { return 1.0 / inv_scale_; }  // λ^N

  WorkloadModelOptions options_;
  double lambda_ = 1;
  double inv_scale_ = 1;  // λ^(−N) since the last renormalisation
  int64_t observed_ = 0;
  uint64_t next_seq_ = 0;
  std::map<Key, Entry> classes_;
};

}  // namespace gpupool::placement
