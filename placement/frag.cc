#include "placement/frag.h"

#include <algorithm>
#include <cmath>

#include "placement/fit.h"

namespace gpupool::placement {

const FragModel::Agg& FragModel::Of(const NodeState& node) const {
  if (cache_.size() <= static_cast<size_t>(node.slot))
    cache_.resize(static_cast<size_t>(node.slot) + 1);
  Agg& a = cache_[static_cast<size_t>(node.slot)];
  if (a.version == node.version) return a;
  const std::vector<FragClass>& w = *workload_;
  a.version = node.version;
  a.count_fit.assign(w.size(), 0);
  a.sliver.assign(w.size(), 0);
  a.f = 0;
  for (size_t m = 0; m < w.size(); ++m) {
    const FragClass& c = w[m];
    int32_t count = 0, sliver = 0;
    for (const DeviceState& d : node.devices) {
      if (d.free_milli == 0) continue;
      const bool allowed = (c.model_mask >> (d.model & 63)) & 1;
      if (allowed && d.free_milli >= c.gpu_milli) {
        ++count;
      } else {
        sliver += d.free_milli;
      }
    }
    a.count_fit[m] = count;
    a.sliver[m] = sliver;
    const bool fits = c.gpu_count > 0 && node.cpu_free() >= c.cpu_milli && count >= c.gpu_count;
    a.f += c.p * (fits ? sliver : node.idle_milli);
  }
  return a;
}

double FragModel::Delta(const NodeState& node, const FragChange* changes, int n,
                        int64_t cpu_after) const {
  const Agg& a = Of(node);
  const std::vector<FragClass>& w = *workload_;
  int32_t idle = node.idle_milli;
  for (int i = 0; i < n; ++i)
    idle += changes[i].new_free - node.devices[static_cast<size_t>(changes[i].device)].free_milli;
  double f = 0;
  for (size_t m = 0; m < w.size(); ++m) {
    const FragClass& c = w[m];
    int32_t count = a.count_fit[m], sliver = a.sliver[m];
    for (int i = 0; i < n; ++i) {
      const DeviceState& d = node.devices[static_cast<size_t>(changes[i].device)];
      const bool allowed = (c.model_mask >> (d.model & 63)) & 1;
      const int32_t before = d.free_milli, after = changes[i].new_free;
      // Undo the device's old contribution, add its new one.
      if (before > 0) {
        if (allowed && before >= c.gpu_milli)
          --count;
        else
          sliver -= before;
      }
      if (after > 0) {
        if (allowed && after >= c.gpu_milli)
          ++count;
        else
          sliver += after;
      }
    }
    const bool fits = c.gpu_count > 0 && cpu_after >= c.cpu_milli && count >= c.gpu_count;
    f += c.p * (fits ? sliver : idle);
  }
  return f - a.f;
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
