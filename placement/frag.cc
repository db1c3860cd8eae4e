#include "placement/frag.h"

#include <algorithm>
#include <cmath>

#include "placement/fit.h"

namespace gpupool::placement {

namespace {

// ⌊x / d⌋ for 0 ≤ x < 2^31 given inv = 1/d, d ≤ 2^21: the product's error is far below the
// distance 1/d from x/d to the next integer, so the small nudge makes the floor exact.
int64_t FloorDiv(int64_t x, double inv) {
  return static_cast<int64_t>(static_cast<double>(x) * inv + 1e-9);
}

}  // namespace

void FragModel::BuildShapes() const {
  shapes_.clear();
  terms_.clear();
  idle_f_ = idle_h_ = 0;
  std::vector<std::vector<Term>> by_shape;
  for (const FragClass& c : *workload_) {
    if (c.gpu_count <= 0) {  // CPU-only: all idle share counts in F and in H, whatever the node
      idle_f_ += c.p;
      idle_h_ += c.p / c.reach;
      continue;
    }
    size_t k = 0;
    while (k < shapes_.size() &&
           !(shapes_[k].gpu_milli == c.gpu_milli && shapes_[k].gpu_count == c.gpu_count &&
             shapes_[k].model_mask == c.model_mask))
      ++k;
    if (k == shapes_.size()) {
      Shape sh;
      sh.gpu_milli = c.gpu_milli;
      sh.gpu_count = c.gpu_count;
      sh.model_mask = c.model_mask;
      sh.inv_gpu = c.inv_gpu;
      shapes_.push_back(sh);
      by_shape.emplace_back();
    }
    Shape& sh = shapes_[k];
    const double hw = c.p / c.reach;
    const int64_t demand = int64_t{c.gpu_milli} * c.gpu_count;
    sh.f_weight += c.p;
    sh.max_memory = std::max(sh.max_memory, c.memory_mib);
    sh.h_weight += hw;
    sh.h_demand += hw * static_cast<double>(demand);
    by_shape[k].push_back(Term{c.cpu_milli, c.memory_mib, c.p, hw * static_cast<double>(demand),
                               c.inv_cpu, c.inv_mem});
  }
  // Each shape's terms, contiguous and by CPU ascending (F counts those with too little CPU from
  // the top down).
  for (size_t k = 0; k < shapes_.size(); ++k) {
    std::sort(by_shape[k].begin(), by_shape[k].end(),
              [](const Term& x, const Term& y) { return x.cpu_milli < y.cpu_milli; });
    shapes_[k].begin = static_cast<int>(terms_.size());
    terms_.insert(terms_.end(), by_shape[k].begin(), by_shape[k].end());
    shapes_[k].end = static_cast<int>(terms_.size());
  }
  built_ = true;
}

// F and H of a node whose shapes see count/sliver/units, with `idle` share, CPU and memory free.
// Per shape: F = Σ p (sliver if the class fits, else idle), where it fits when count ≥ k and the
// CPU suffices; H = Σ (p / reach)(idle − n · g k) with n = units / k, unless the class's CPU or
// memory allows fewer — only those classes are visited one by one.
void FragModel::Measures(const int32_t* count, const int32_t* sliver, const int32_t* units,
                         int32_t idle, int64_t cpu_free, int64_t mem_free, double* f,
                         double* h) const {
  double fs = idle_f_ * idle, hs = idle_h_ * idle;
  for (size_t k = 0; k < shapes_.size(); ++k) {
    const Shape& sh = shapes_[k];
    const Term* first = terms_.data() + sh.begin;
    const Term* last = terms_.data() + sh.end;
    hs += sh.h_weight * idle;
    if (count[k] >= sh.gpu_count) {
      double short_of_cpu = 0;  // p of the classes whose CPU exceeds what is free
      for (const Term* t = last; t != first && (t - 1)->cpu_milli > cpu_free; --t)
        short_of_cpu += (t - 1)->f_weight;
      fs += (sh.f_weight - short_of_cpu) * sliver[k] + short_of_cpu * idle;
    } else {
      fs += sh.f_weight * idle;
    }
    const int64_t n = sh.gpu_count == 1 ? units[k] : units[k] / sh.gpu_count;
    if (n <= 0 || cpu_free < 0 || mem_free < 0) continue;  // hosts none
    hs -= sh.h_demand * static_cast<double>(n);
    // Classes whose CPU or memory hosts fewer than n: by CPU from the top; all when memory may.
    const Term* from = first;
    if (n * sh.max_memory <= mem_free) {
      from = last;
      while (from != first && n * (from - 1)->cpu_milli > cpu_free) --from;
    }
    for (const Term* t = from; t != last; ++t) {
      if (n * t->cpu_milli <= cpu_free && n * t->memory_mib <= mem_free) continue;
      int64_t m = n;
      if (m * t->cpu_milli > cpu_free) m = FloorDiv(cpu_free, t->inv_cpu);
      if (m * t->memory_mib > mem_free) m = FloorDiv(mem_free, t->inv_mem);
      hs += t->h_demand * static_cast<double>(n - m);
    }
  }
  *f = fs;
  *h = hs;
}

const FragModel::Agg& FragModel::Of(const NodeState& node) const {
  if (!built_) BuildShapes();
  if (cache_.size() <= static_cast<size_t>(node.slot))
    cache_.resize(static_cast<size_t>(node.slot) + 1);
  Agg& a = cache_[static_cast<size_t>(node.slot)];
  if (a.version == node.version) return a;
  a.version = node.version;
  a.count_fit.assign(shapes_.size(), 0);
  a.sliver.assign(shapes_.size(), 0);
  a.units.assign(shapes_.size(), 0);
  for (size_t k = 0; k < shapes_.size(); ++k) {
    const Shape& sh = shapes_[k];
    int32_t count = 0, sliver = 0, units = 0;
    for (const DeviceState& d : node.devices) {
      if (d.free_milli == 0) continue;
      const bool allowed = (sh.model_mask >> (d.model & 63)) & 1;
      if (allowed) units += static_cast<int32_t>(FloorDiv(d.free_milli, sh.inv_gpu));
      if (allowed && d.free_milli >= sh.gpu_milli) {
        ++count;
      } else {
        sliver += d.free_milli;
      }
    }
    a.count_fit[k] = count;
    a.sliver[k] = sliver;
    a.units[k] = units;
  }
  Measures(a.count_fit.data(), a.sliver.data(), a.units.data(), node.idle_milli, node.cpu_free(),
           node.mem_free(), &a.f, &a.h);
  return a;
}

FragModel::Deltas FragModel::Delta(const NodeState& node, const FragChange* changes, int n,
                                   int64_t cpu_after, int64_t mem_after) const {
  const Agg& a = Of(node);
  // The changed devices' model, old and new free share, gathered once for every shape.
  int model[kMaxDevicesPerNode];
  int32_t before[kMaxDevicesPerNode], after[kMaxDevicesPerNode];
  int32_t idle = node.idle_milli;
  for (int i = 0; i < n; ++i) {
    const DeviceState& d = node.devices[static_cast<size_t>(changes[i].device)];
    model[i] = d.model & 63;
    before[i] = d.free_milli;
    after[i] = changes[i].new_free;
    idle += after[i] - before[i];
  }
  // Per shape, the aggregates after the change: swap each device's old contribution for its new
  // one (a free share of 0 adds nothing).
  const size_t ns = shapes_.size();
  int32_t* count = scratch_count_.data();
  int32_t* sliver = scratch_sliver_.data();
  int32_t* units = scratch_units_.data();
  if (scratch_count_.size() < ns) {
    scratch_count_.resize(ns), scratch_sliver_.resize(ns), scratch_units_.resize(ns);
    count = scratch_count_.data(), sliver = scratch_sliver_.data(), units = scratch_units_.data();
  }
  for (size_t k = 0; k < ns; ++k) {
    const Shape& sh = shapes_[k];
    const int32_t g = sh.gpu_milli;
    int32_t ct = a.count_fit[k], sl = a.sliver[k], un = a.units[k];
    for (int i = 0; i < n; ++i) {
      if ((sh.model_mask >> model[i]) & 1) {
        un +=
            static_cast<int32_t>(FloorDiv(after[i], sh.inv_gpu) - FloorDiv(before[i], sh.inv_gpu));
        ct += (after[i] >= g ? 1 : 0) - (before[i] >= g ? 1 : 0);
        sl += (after[i] < g ? after[i] : 0) - (before[i] < g ? before[i] : 0);
      } else {
        sl += after[i] - before[i];
      }
    }
    count[k] = ct, sliver[k] = sl, units[k] = un;
  }
  Deltas out;
  Measures(count, sliver, units, idle, cpu_after, mem_after, &out.f, &out.h);
  out.f -= a.f;
  out.h -= a.h;
  if (gpu_per_cpu_ > 0) {
    auto stranded = [&](int32_t g, int64_t cpu) {
      return std::max(0.0, static_cast<double>(g) - static_cast<double>(cpu) * gpu_per_cpu_);
    };
    out.s = stranded(idle, cpu_after) - stranded(node.idle_milli, node.cpu_free());
  }
  if (!waste_.empty())
    for (int i = 0; i < n; ++i) out.waste += Waste(after[i]) - Waste(before[i]);
  const auto type = static_cast<size_t>(node.type);
  if (type < pressure_.size() && !pressure_[type].empty())
    for (int i = 0; i < n; ++i)
      out.pressure += (before[i] - after[i]) * pressure_[type][static_cast<size_t>(model[i])];
  return out;
}

double FragModel::Waste(int32_t free) const {
  const auto top = static_cast<int32_t>(waste_.size()) - 1;
  return free >= top || free < 0 ? 0.0 : waste_[static_cast<size_t>(free)];
}

int64_t FgdQuantised(double delta) {
  return static_cast<int64_t>(100.0 / (1.0 + std::exp(delta / 1000.0)));
}

int MakeChanges(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen,
                FragChange* out) {
  for (int k = 0; k < chosen.n; ++k) {
    const int i = chosen.idx[static_cast<size_t>(k)];
    const DeviceState& d = node.devices[static_cast<size_t>(i)];
    int32_t after = 0;  // whole, MIG and time-sliced devices stop taking shares
    if (req.kind == RequestKind::kFractional) after = std::max(0, d.free_milli - NeedMilli(d, req));
    out[k] = FragChange{i, after};
  }
  return chosen.n;
}

}  // namespace gpupool::placement
