#include "placement/workload_feed.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

namespace gpupool::placement {

uint64_t PoolTieSeed(std::string_view pool_name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : pool_name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

uint64_t DaemonTieSeed(Strategy s, std::string_view pool_name) {
  return UsesWorkload(s) ? PoolTieSeed(pool_name) : 0;
}

uint64_t ReplayTieSeed(Strategy s, uint64_t seed) { return UsesWorkload(s) ? seed : 0; }

bool UsesWorkload(Strategy s) { return s == Strategy::kFgd || s == Strategy::kFgdPack; }

double WorkloadCoverage(Strategy s) { return s == Strategy::kFgd ? 0.95 : 1.0; }

bool UsesGuardClasses(Strategy s) { return s == Strategy::kFgdPack; }

std::vector<Request> GuardShapes(const std::vector<NodeCapacity>& nodes) {
  using Shape = std::tuple<int32_t, int64_t, int64_t>;  // GPUs, CPU, memory
  std::set<Shape> shapes;
  for (const NodeCapacity& n : nodes) {
    if (!n.schedulable) continue;
    int32_t gpus = 0;
    for (const DeviceCapacity& d : n.devices) gpus += d.mig_profile.empty() ? 1 : 0;
    if (gpus > 0) shapes.emplace(gpus, n.cpu_milli, n.memory_mib);
  }
  auto dominated = [&](const Shape& a) {
    for (const Shape& b : shapes) {
      if (b != a && std::get<0>(b) >= std::get<0>(a) && std::get<1>(b) >= std::get<1>(a) &&
          std::get<2>(b) >= std::get<2>(a))
        return true;
    }
    return false;
  };
  std::vector<Request> out;
  for (const Shape& s : shapes) {
    if (dominated(s)) continue;
    Request r;
    r.kind = RequestKind::kWholeGpu;
    r.gpu_count = std::get<0>(s);
    r.cpu_milli = std::get<1>(s);
    r.memory_mib = std::get<2>(s);
    out.push_back(std::move(r));
  }
  return out;
}

WorkloadFeed::WorkloadFeed(WorkloadModelOptions options, int64_t refresh_tasks)
    : model_(options), refresh_tasks_(std::max<int64_t>(refresh_tasks, 1)) {}

namespace {

// Σ |a − b| over two (id, share) lists sorted by id; an id missing from one side counts 0 there.
double L1(const std::vector<std::pair<uint64_t, double>>& a,
          const std::vector<std::pair<uint64_t, double>>& b) {
  double d = 0;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      d += a[i++].second;
    } else if (i == a.size() || b[j].first < a[i].first) {
      d += b[j++].second;
    } else {
      d += std::abs(a[i++].second - b[j++].second);
    }
  }
  return d;
}

}  // namespace

bool WorkloadFeed::Sync(Engine& engine) {
  const Strategy s = engine.policy().strategy;
  if (!UsesWorkload(s)) return false;
  const int64_t n = model_.tasks_observed();
  const bool stale = !engine.workload_given() || engine.inventory_changed_since_workload();
  const int64_t step = std::clamp<int64_t>(checked_at_, 1, refresh_tasks_);
  if (!stale && n - checked_at_ < step) return false;
  checked_at_ = n;
  const std::vector<LearnedClass> classes = model_.Classes(WorkloadCoverage(s));
  std::vector<std::pair<uint64_t, double>> now;
  for (const LearnedClass& c : classes) now.emplace_back(c.id, c.share);
  std::sort(now.begin(), now.end());
  if (!stale && L1(now, pushed_) < kDrift) return false;
  std::vector<WorkloadClass> w;
  double learned = 0;
  for (const LearnedClass& c : classes) {
    w.push_back(WorkloadClass{c.shape, c.share});
    learned += c.weight;
  }
  if (UsesGuardClasses(s)) {
    // One task's weight each, as a share of the learned classes' (which sum to 1).
    const double guard = 1.0 / (1.0 + learned);
    for (Request& r : GuardShapes(engine.Capacity()))
      w.push_back(WorkloadClass{std::move(r), guard});
  }
  engine.SetWorkload(std::move(w));
  pushed_ = std::move(now);
  ++pushes_;
  return true;
}

}  // namespace gpupool::placement
