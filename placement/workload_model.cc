#include "placement/workload_model.h"

#include <algorithm>
#include <cmath>

namespace gpupool::placement {
namespace {

// Past this, stored weights are rescaled (λ^(−N) would overflow after ~1024 half-lives).
constexpr double kRenormaliseAt = 0x1p200;
// The prior is left out once it weighs under this share of the total.
constexpr double kPriorFloor = 1.0 / 32;

std::string JoinSorted(std::vector<std::string> models) {
  std::sort(models.begin(), models.end());
  std::string out;
  for (const std::string& m : models) {
    out += out.empty() ? "" : "|";
    out += m;
  }
  return out;
}

}  // namespace

// How far apart two classes of the same kind, device count, models and MIG profile are: the
// difference in share (a whole GPU = 1), per-device compute (1 per 1,000 TFLOPS), VRAM (1 per
// 1 TiB) and CPU (1 per 16 cores) — share first, the rest to break ties sensibly.
double WorkloadModel::FoldDistance(const Key& a, const Key& b) {
  auto diff = [](int64_t x, int64_t y) { return std::abs(static_cast<double>(x - y)); };
  return diff(std::get<1>(a), std::get<1>(b)) / 1000.0 +
         diff(std::get<2>(a), std::get<2>(b)) / 1e6 +
         diff(std::get<3>(a), std::get<3>(b)) / 1048576.0 +
         diff(std::get<7>(a), std::get<7>(b)) / 16000.0;
}

std::vector<Request> WorkloadModel::PriorClasses() {
  std::vector<Request> out;
  for (int32_t share : {250, 500, 750}) {
    Request r;
    r.kind = RequestKind::kFractional;
    r.share_milli = share;
    r.cpu_milli = 1000;
    r.memory_mib = 4096;
    out.push_back(r);
  }
  for (int gpus : {1, 2, 4, 8}) {
    Request r;
    r.kind = RequestKind::kWholeGpu;
    r.gpu_count = gpus;
    r.cpu_milli = int64_t{8000} * gpus;
    r.memory_mib = int64_t{32768} * gpus;
    out.push_back(r);
  }
  return out;
}

WorkloadModel::WorkloadModel(WorkloadModelOptions options) : options_(options) {
  lambda_ = options_.half_life_tasks > 0 ? std::exp2(-1.0 / options_.half_life_tasks) : 1.0;
  const std::vector<Request> prior = PriorClasses();
  if (options_.prior_weight > 0) {
    for (const Request& r : prior)
      Add(r, options_.prior_weight / static_cast<double>(prior.size()), true);
  }
}

WorkloadModel::Key WorkloadModel::KeyOf(const Request& r) {
  const bool share = r.share_milli > 0;
  return Key{r.kind,
             r.share_milli,
             share ? 0 : r.per_device.milli_tflops,
             share ? 0 : r.per_device.vram_mib,
             r.kind == RequestKind::kCpuOnly ? 0 : r.gpu_count,
             JoinSorted(r.allowed_models),
             r.mig_profile,
             r.cpu_milli};
}

void WorkloadModel::Observe(const Request& r, int64_t count) {
  if (count <= 0) return;
  observed_ += count;
  inv_scale_ /= std::pow(lambda_, static_cast<double>(count));
  if (inv_scale_ > kRenormaliseAt) Renormalise();
  Add(r, static_cast<double>(count), false);
}

void WorkloadModel::Add(const Request& r, double count, bool prior) {
  Key key = KeyOf(r);
  auto it = classes_.find(key);
  if (it == classes_.end()) {
    if (classes_.size() >= std::max<size_t>(options_.max_classes, 1)) Evict();
    Entry e;
    e.first_seen = next_seq_++;
    e.prior = prior;
    e.shape = r;
    std::sort(e.shape.allowed_models.begin(), e.shape.allowed_models.end());
    it = classes_.emplace(std::move(key), std::move(e)).first;
  }
  Entry& e = it->second;
  if (!prior) e.prior = false;
  e.scaled += count * inv_scale_;
  e.scaled_mem += count * static_cast<double>(r.memory_mib) * inv_scale_;
}

void WorkloadModel::Evict() {
  // The lightest goes; among equals the most recently seen (the older one has a history).
  auto victim = classes_.begin();
  for (auto c = classes_.begin(); c != classes_.end(); ++c) {
    if (c->second.scaled < victim->second.scaled ||
        (c->second.scaled == victim->second.scaled &&
         c->second.first_seen > victim->second.first_seen))
      victim = c;
  }
  // An observed class's weight is folded into the nearest kept class of the same kind, device
  // count, models and MIG profile, so each model set keeps its share of the demand: dropping it
  // would let the pinned shares of a pool with thousands of shapes (each seen once or twice)
  // vanish while the few whole-GPU shapes stay, and fgd-pack's model pressure would read that.
  if (!victim->second.prior) {
    const Key& v = victim->first;
    auto into = classes_.end();
    double best = 0;
    for (auto c = classes_.begin(); c != classes_.end(); ++c) {
      const Key& k = c->first;
      if (c == victim || c->second.prior || std::get<0>(k) != std::get<0>(v) ||
          std::get<4>(k) != std::get<4>(v) || std::get<5>(k) != std::get<5>(v) ||
          std::get<6>(k) != std::get<6>(v))
        continue;
      const double d = FoldDistance(k, v);
      if (into == classes_.end() || d < best) into = c, best = d;
    }
    if (into != classes_.end()) {
      into->second.scaled += victim->second.scaled;
      into->second.scaled_mem += victim->second.scaled_mem;
    }
  }
  classes_.erase(victim);
}

void WorkloadModel::Renormalise() {
  const double now = Now();
  for (auto& [key, e] : classes_) {
    e.scaled *= now;
    e.scaled_mem *= now;
  }
  inv_scale_ = 1;
}

double WorkloadModel::observed_weight() const {
  double s = 0;
  for (const auto& [key, e] : classes_)
    if (!e.prior) s += e.scaled;
  return s * Now();
}

double WorkloadModel::prior_weight() const {
  double s = 0;
  for (const auto& [key, e] : classes_)
    if (e.prior) s += e.scaled;
  return s * Now();
}

std::vector<LearnedClass> WorkloadModel::Classes(double coverage) const {
  double prior = 0, all = 0;
  for (const auto& [key, e] : classes_) {
    all += e.scaled;
    if (e.prior) prior += e.scaled;
  }
  const bool drop_prior = prior < kPriorFloor * all;
  const double total = drop_prior ? all - prior : all;
  std::vector<const Entry*> sorted;
  for (const auto& [key, e] : classes_)
    if (!(drop_prior && e.prior)) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->scaled != b->scaled ? a->scaled > b->scaled : a->first_seen < b->first_seen;
  });
  std::vector<LearnedClass> out;
  double covered = 0;
  for (const Entry* e : sorted) {
    if (covered >= coverage * total) break;
    covered += e->scaled;
    LearnedClass c;
    c.shape = e->shape;
    // A weight that underflowed to 0 keeps the memory it was first seen with.
    c.shape.memory_mib =
        e->scaled > 0 ? std::llround(e->scaled_mem / e->scaled) : e->shape.memory_mib;
    c.weight = e->scaled * Now();
    c.share = total > 0 ? e->scaled / total : 0;
    c.prior = e->prior;
    c.id = e->first_seen;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<WorkloadClass> WorkloadModel::ForEngine(double coverage) const {
  std::vector<WorkloadClass> out;
  for (LearnedClass& c : Classes(coverage))
    out.push_back(WorkloadClass{std::move(c.shape), c.share});
  return out;
}

}  // namespace gpupool::placement
