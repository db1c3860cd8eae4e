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

// Class-m tasks the node can host: by GPU units, CPU and memory, whichever runs out first.
// Usually the GPUs bind, so a multiply-and-compare rules CPU and memory out before dividing.
inline int64_t Hostable(const FragClass& c, int32_t units, int64_t cpu_free, int64_t mem_free) {
  if (c.gpu_count <= 0 || cpu_free < 0 || mem_free < 0) return 0;
  int64_t n = c.gpu_count == 1 ? units : units / c.gpu_count;
  if (n * c.cpu_milli > cpu_free) n = FloorDiv(cpu_free, c.inv_cpu);
  if (n * c.memory_mib > mem_free) n = FloorDiv(mem_free, c.inv_mem);
  return n;
}

inline double FgdTerm(const FragClass& c, int32_t count, int32_t sliver, int32_t idle,
                      int64_t cpu_free) {
  const bool fits = c.gpu_count > 0 && cpu_free >= c.cpu_milli && count >= c.gpu_count;
  return c.p * (fits ? sliver : idle);
}

inline double CountTerm(const FragClass& c, int32_t units, int32_t idle, int64_t cpu_free,
                        int64_t mem_free) {
  const int64_t usable = Hostable(c, units, cpu_free, mem_free) * c.gpu_milli * c.gpu_count;
  return c.p / c.reach * static_cast<double>(idle - usable);
}

}  // namespace

const FragModel::Agg& FragModel::Of(const NodeState& node) const {
  if (cache_.size() <= static_cast<size_t>(node.slot))
    cache_.resize(static_cast<size_t>(node.slot) + 1);
  Agg& a = cache_[static_cast<size_t>(node.slot)];
  if (a.version == node.version) return a;
  const std::vector<FragClass>& w = *workload_;
  a.version = node.version;
  a.count_fit.assign(w.size(), 0);
  a.sliver.assign(w.size(), 0);
  a.units.assign(w.size(), 0);
  a.f = a.h = 0;
  for (size_t m = 0; m < w.size(); ++m) {
    const FragClass& c = w[m];
    int32_t count = 0, sliver = 0, units = 0;
    for (const DeviceState& d : node.devices) {
      if (d.free_milli == 0) continue;
      const bool allowed = (c.model_mask >> (d.model & 63)) & 1;
      if (allowed) units += static_cast<int32_t>(FloorDiv(d.free_milli, c.inv_gpu));
      if (allowed && d.free_milli >= c.gpu_milli) {
        ++count;
      } else {
        sliver += d.free_milli;
      }
    }
    a.count_fit[m] = count;
    a.sliver[m] = sliver;
    a.units[m] = units;
    a.f += FgdTerm(c, count, sliver, node.idle_milli, node.cpu_free());
    a.h += CountTerm(c, units, node.idle_milli, node.cpu_free(), node.mem_free());
  }
  return a;
}

FragModel::Deltas FragModel::Delta(const NodeState& node, const FragChange* changes, int n,
                                   int64_t cpu_after, int64_t mem_after) const {
  const Agg& a = Of(node);
  const std::vector<FragClass>& w = *workload_;
  // The changed devices' model, old and new free share, gathered once for every class.
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
  Deltas out;
  for (size_t m = 0; m < w.size(); ++m) {
    const FragClass& c = w[m];
    const int32_t g = c.gpu_milli;
    int32_t count = a.count_fit[m], sliver = a.sliver[m], units = a.units[m];
    for (int i = 0; i < n; ++i) {
      // Swap the device's old contribution for its new one (a free share of 0 adds nothing).
      if ((c.model_mask >> model[i]) & 1) {
        units +=
            static_cast<int32_t>(FloorDiv(after[i], c.inv_gpu) - FloorDiv(before[i], c.inv_gpu));
        count += (after[i] >= g ? 1 : 0) - (before[i] >= g ? 1 : 0);
        sliver += (after[i] < g ? after[i] : 0) - (before[i] < g ? before[i] : 0);
      } else {
        sliver += after[i] - before[i];
      }
    }
    out.f += FgdTerm(c, count, sliver, idle, cpu_after);
    out.h += CountTerm(c, units, idle, cpu_after, mem_after);
  }
  out.f -= a.f;
  out.h -= a.h;
  return out;
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
