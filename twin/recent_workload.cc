// Recent workload (recent_workload.h): the store's pool history and the daemon's snapshots as a
// twin replay.
#include "twin/recent_workload.h"

#include <algorithm>
#include <set>

#include "placement/strategy.h"
#include "pool/catalog.h"
#include "pool/mig_layout.h"
#include "scheduler/mig_layouts.h"

namespace gpupool::twin {
namespace {

constexpr int64_t kSecondUs = 1'000'000;

// ceil(a × 1000 / b) for b > 0.
int64_t PerMille(int64_t a, int64_t b) { return b <= 0 ? 0 : (a * 1000 + b - 1) / b; }

// The pool's GPUs: devices that are not MIG instances. They are read from the node's record
// (NodeView::node.devices), which has every device its agent reported: the view's own list is
// placement's, where a GPU in MIG mode is only its instances.
bool IsGpu(const DeviceRecord& d) { return d.mig_profile.empty(); }

// A GPU in MIG mode: one whose layout can change, or one with instances.
std::optional<TwinMigGpu> MigGpuOf(const NodeView& n, const DeviceRecord& gpu) {
  TwinMigGpu out{ReportedMigLayout(n.node, gpu.id), gpu.mig_enabled};
  if (!gpu.mig_enabled && out.layout.empty()) return std::nullopt;
  return out;
}

// The twin's request for a task, in units of `unit`; nullopt when the twin cannot model it.
// `mig_milli`: each MIG profile the pool's MIG GPUs have, as its compute share of `unit`.
std::optional<TwinTask> Shape(const ResourceRequest& in, const Resources& unit,
                              const SchedulerOptions& options,
                              const std::map<std::string, int32_t>& mig_milli) {
  ResourceRequest r = in;
  if (r.shape == RequestShape::kSku) {
    auto it = options.skus.find(r.sku);
    if (it == options.skus.end()) return std::nullopt;
    r = it->second.request;
  }
  TwinTask t;
  t.cpu_milli = r.cpu_milli;
  t.memory_mib = r.memory_mib;
  switch (r.shape) {
    case RequestShape::kFractional: {
      int64_t share = std::max(PerMille(r.fractional.milli_tflops, unit.milli_tflops),
                               PerMille(r.fractional.vram_mib, unit.vram_mib));
      t.gpu_milli = static_cast<int32_t>(std::clamp<int64_t>(share, 1, 1000));
      t.num_gpu = 1;
      return t;
    }
    case RequestShape::kWholeGpus:
      t.gpu_milli = 1000;
      t.num_gpu = std::max(1, r.gpu_count);
      t.models = r.models;
      return t;
    case RequestShape::kMig: {
      auto it = mig_milli.find(r.mig_profile);
      if (it == mig_milli.end()) return std::nullopt;
      t.mig_profile = r.mig_profile;
      t.gpu_milli = it->second;
      t.num_gpu = 1;
      return t;
    }
    default:
      return std::nullopt;
  }
}

void AddWithAncestors(const std::string& path, std::set<std::string>* out) {
  for (size_t i = path.find('/'); i != std::string::npos; i = path.find('/', i + 1))
    out->insert(path.substr(0, i));
  out->insert(path);
}

}  // namespace

int64_t QuotaPctMilli(const QuotaAmount& a, const Resources& unit, int64_t gpus) {
  const int64_t pool_tflops = gpus * unit.milli_tflops;
  if (pool_tflops <= 0) return 0;
  int64_t tflops = a.resources.milli_tflops;
  tflops = std::max(tflops, int64_t{a.devices} * unit.milli_tflops);
  if (unit.vram_mib > 0)
    tflops = std::max(tflops, a.resources.vram_mib * unit.milli_tflops / unit.vram_mib);
  // Rounded up, so that the twin's quota (⌊pool × pct / 100 %⌋) is never below the real one by
  // more than the rounding of one step.
  const int64_t pct = (tflops * 100'000 + pool_tflops - 1) / pool_tflops;
  return std::min<int64_t>(pct, 100'000);
}

Result<RecentWorkload> ExtractRecentWorkload(const PoolHistory& history, const LivePool& live) {
  RecentWorkload out;
  Workload& w = out.workload;
  w.name = "pool " + live.pool.name + " (recent)";
  Resources unit{0, 0};
  for (const NodeView& n : live.nodes) {
    for (const DeviceRecord& d : n.node.devices) {
      if (!IsGpu(d)) continue;
      if (d.physical.milli_tflops > unit.milli_tflops) unit = d.physical;
    }
  }
  const Catalog& catalog =
      live.scheduler.catalog != nullptr ? *live.scheduler.catalog : Catalog::Builtin();
  std::map<std::string, int32_t> mig_milli;
  ExtractionStats& st = out.stats;
  for (const NodeView& n : live.nodes) {
    TwinNode tn;
    tn.name = n.node.name;
    tn.cpu_milli = n.node.cpu_milli;
    tn.memory_mib = n.node.memory_mib;
    for (const DeviceRecord& d : n.node.devices) {
      if (!IsGpu(d)) continue;
      std::optional<TwinMigGpu> mig = MigGpuOf(n, d);
      if (mig) {
        if (!CheckTwinMigGpu(catalog, d.model, *mig).ok()) {
          ++st.unmodelled_gpus;
          continue;
        }
        for (const MigProfile& p : catalog.Find(d.model)->mig_profiles) {
          mig_milli.emplace(p.name, static_cast<int32_t>(std::clamp<int64_t>(
                                        PerMille(p.milli_tflops, unit.milli_tflops), 1, 1000)));
        }
        tn.mig[tn.gpus] = *std::move(mig);
      }
      if (tn.model.empty()) tn.model = d.model;
      tn.device_ids.push_back(d.id);
      ++tn.gpus;
    }
    if (tn.gpus > 0) w.nodes.push_back(std::move(tn));
  }
  if (w.nodes.empty() || unit.milli_tflops <= 0) {
    return Status::FailedPrecondition("pool: '" + live.pool.name +
                                      "' has no GPU to replay on (no node with a GPU)");
  }
  w.gpu = unit;

  std::set<std::string> tenants;
  st.truncated = history.truncated;
  for (const PoolHistoryTask& h : history.tasks) {
    const bool started = h.started_us > 0;
    const bool ended = h.finished_us > 0;
    if (!started && ended) {
      ++st.never_ran;
      continue;
    }
    std::optional<TwinTask> t = Shape(h.request, unit, live.scheduler, mig_milli);
    if (!t) {
      ++st.unmodelled;
      continue;
    }
    t->name = "job" + std::to_string(h.job_id) + "." + std::to_string(h.index);
    t->arrival_us = std::max<int64_t>(0, h.submit_us - live.from_us);
    int64_t run_us = 0;
    if (started && ended) {
      run_us = h.finished_us - h.started_us;
    } else if (started) {
      run_us = live.to_us - h.started_us;
      ++st.running_censored;
    } else {
      run_us = live.to_us - h.submit_us;
      ++st.pending_censored;
    }
    t->duration_us = std::max(kSecondUs, run_us);
    t->tenant = h.tenant;
    t->priority_class =
        h.priority_class.empty() ? live.scheduler.default_priority_class : h.priority_class;
    AddWithAncestors(h.tenant, &tenants);
    w.tasks.push_back(std::move(*t));
  }
  std::stable_sort(w.tasks.begin(), w.tasks.end(), [](const TwinTask& a, const TwinTask& b) {
    return a.arrival_us != b.arrival_us ? a.arrival_us < b.arrival_us : a.name < b.name;
  });
  st.tasks = static_cast<int64_t>(w.tasks.size());

  const int64_t gpus = w.GpuCount();
  std::map<std::string, const QuotaRecord*> quota_of;
  for (const QuotaRecord& q : live.quotas) {
    if (q.pool != live.pool.name) continue;
    quota_of[q.tenant] = &q;
    AddWithAncestors(q.tenant, &tenants);
  }
  for (const std::string& path : tenants) {  // a parent sorts before its children
    OrgTenant t;
    t.path = path;
    if (auto it = quota_of.find(path); it != quota_of.end()) {
      t.guaranteed_pct_milli = QuotaPctMilli(it->second->guaranteed, unit, gpus);
      t.limit_pct_milli = QuotaPctMilli(it->second->limit, unit, gpus);
    }
    out.org.tenants.push_back(std::move(t));
  }
  out.org.default_class = live.scheduler.default_priority_class;

  TwinConfig& c = out.baseline;
  c.label = "baseline";
  c.pool = live.pool.name;
  c.strategy = live.pool.placement_strategy;
  c.compute_overcommit_permille = live.pool.compute_overcommit.permille;
  c.mig_relayout = live.pool.mig_relayout;
  c.queue_order = live.scheduler.tenancy.queue_order;
  c.scheduler = live.scheduler;
  c.preemption = true;  // as the daemon's classes have it
  c.horizon_us = std::max<int64_t>(1, live.to_us - live.from_us);
  c.series_points = 100;
  return out;
}

Result<RecentWorkload> ApplyChange(const RecentWorkload& base, const LivePool& live,
                                   const ConfigChange& change) {
  RecentWorkload out = base;
  TwinConfig& c = out.baseline;
  c.label = "candidate";
  if (change.strategy) {
    if (!placement::ParseStrategy(*change.strategy).ok()) {
      return Status::InvalidArgument("strategy: unknown placement strategy '" + *change.strategy +
                                     "'");
    }
    c.strategy = *change.strategy;
  }
  if (change.compute_overcommit_permille) {
    if (*change.compute_overcommit_permille < 1000) {
      return Status::InvalidArgument("compute_overcommit: must be at least 1");
    }
    c.compute_overcommit_permille = *change.compute_overcommit_permille;
  }
  if (change.preemption) c.preemption = *change.preemption;
  if (change.mig_relayout) c.mig_relayout = *change.mig_relayout;
  const std::set<std::string> known(live.tenants.begin(), live.tenants.end());
  const Resources unit = out.workload.gpu;
  const int64_t gpus = out.workload.GpuCount();
  for (const auto& [tenant, q] : change.quotas) {
    if (!known.contains(tenant)) {
      return Status::InvalidArgument("quota: unknown tenant '" + tenant + "'");
    }
    std::set<std::string> paths;
    AddWithAncestors(tenant, &paths);
    for (const std::string& p : paths) {
      if (out.org.Find(p) == nullptr) out.org.tenants.push_back(OrgTenant{.path = p});
    }
    std::sort(out.org.tenants.begin(), out.org.tenants.end(),
              [](const OrgTenant& a, const OrgTenant& b) { return a.path < b.path; });
    for (OrgTenant& t : out.org.tenants) {
      if (t.path != tenant) continue;
      if (q.guaranteed) t.guaranteed_pct_milli = QuotaPctMilli(*q.guaranteed, unit, gpus);
      if (q.limit) t.limit_pct_milli = QuotaPctMilli(*q.limit, unit, gpus);
      if (t.limit_pct_milli > 0 && t.guaranteed_pct_milli > t.limit_pct_milli) {
        return Status::InvalidArgument("quota: tenant '" + tenant +
                                       "': the guarantee exceeds the limit");
      }
    }
  }
  return out;
}

}  // namespace gpupool::twin
