// Recorder (recorder.h).
#include "twin/recorder.h"

#include <algorithm>
#include <cmath>

namespace gpupool::twin {
namespace {

constexpr double kUs = 1e6;

// Nearest-rank percentiles over a sample (sorted here).
WaitStats Stats(std::vector<double> v, int64_t never_started) {
  WaitStats s;
  s.count = static_cast<int64_t>(v.size());
  s.never_started = never_started;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

Recorder::Recorder(const Workload& w, const OrgTree& org, int64_t offered_per_gpu,
                   std::map<std::string, int64_t> min_runtime_us, int64_t warmup_us,
                   int64_t guarantee_grace_us)
    : w_(w),
      org_(org),
      offered_per_gpu_(offered_per_gpu),
      gpu_(w.gpu.milli_tflops),
      min_runtime_us_(std::move(min_runtime_us)),
      warmup_us_(warmup_us),
      grace_us_(guarantee_grace_us),
      tasks_(w.tasks.size()) {
  const double pool_milli_tflops = static_cast<double>(w.GpuCount()) * gpu_;
  for (const OrgTenant& t : org.tenants) {
    if (!t.HasQuota()) continue;
    Group& g = groups_[t.path];
    g.guaranteed =
        static_cast<int64_t>(pool_milli_tflops * static_cast<double>(t.guaranteed_pct_milli) / 1e5);
    g.limit =
        static_cast<int64_t>(pool_milli_tflops * static_cast<double>(t.limit_pct_milli) / 1e5);
  }
  group_of_task_.reserve(w.tasks.size());
  for (const TwinTask& t : w.tasks) {
    group_of_task_.push_back(org.GroupOf(t.tenant));
    shapes_.push_back(t.gpu_milli < 1000 ? t.gpu_milli / 1000.0 : 1.0);
  }
  std::sort(shapes_.begin(), shapes_.end());
}

void Recorder::Advance(int64_t now) {
  int64_t from = std::max(last_, warmup_us_);
  if (now > from) {
    double dt = static_cast<double>(now - from) / kUs;
    alloc_area_ += alloc_phys_ * dt;
    alloc_off_area_ += alloc_off_ * dt;
    demand_area_ += static_cast<double>(demand_) / 1000.0 * dt;
    frag_area_ += last_frag_ * dt;
    queue_area_ += static_cast<double>(last_queue_) * dt;
    for (auto& [_, g] : groups_)
      g.area += static_cast<double>(g.used) / static_cast<double>(gpu_) * dt;
  }
  last_ = std::max(last_, now);
}

Recorder::Group* Recorder::GroupOfTask(size_t task) {
  auto it = groups_.find(group_of_task_[task]);
  return it == groups_.end() ? nullptr : &it->second;
}

void Recorder::StartWaiting(size_t task, int64_t now) {
  tasks_[task].waiting_since = now;
  if (Group* g = GroupOfTask(task))
    g->waiting[w_.tasks[task].GpuMilli() * gpu_ / 1000].emplace(now, task);
}

void Recorder::StopWaiting(size_t task) {
  TaskState& t = tasks_[task];
  if (t.waiting_since < 0) return;
  if (Group* g = GroupOfTask(task)) {
    int64_t need = w_.tasks[task].GpuMilli() * gpu_ / 1000;
    auto it = g->waiting.find(need);
    if (it != g->waiting.end()) {
      it->second.erase({t.waiting_since, task});
      if (it->second.empty()) g->waiting.erase(it);
    }
  }
  t.waiting_since = -1;
}

void Recorder::Arrive(size_t task, int64_t now) {
  Advance(now);
  tasks_[task].arrival = now;
  demand_ += w_.tasks[task].GpuMilli();
  StartWaiting(task, now);
}

void Recorder::Rejected(size_t task) {
  ++r_.rejected;
  StopWaiting(task);
  demand_ -= w_.tasks[task].GpuMilli();
  tasks_[task].arrival = -1;  // not counted in waits
}

void Recorder::Start(size_t task, int64_t now, const std::vector<Grant>& grants) {
  Advance(now);
  TaskState& t = tasks_[task];
  const TwinTask& spec = w_.tasks[task];
  double waited = static_cast<double>(now - t.waiting_since) / kUs;
  if (!t.started_once) {
    // Waits are those of the measured window: arrivals before --warmup-s (the quiet hours
    // before a busy window) would dilute the percentiles with waits of 0.
    if (t.arrival >= warmup_us_) {
      waits_by_class_[spec.priority_class].push_back(waited);
      waits_by_tenant_[spec.tenant].push_back(waited);
      if (!group_of_task_[task].empty()) waits_by_group_[group_of_task_[task]].push_back(waited);
    }
    t.started_once = true;
  } else if (now >= warmup_us_) {
    requeue_by_class_[spec.priority_class].push_back(waited);
  }
  StopWaiting(task);
  t.attempt_start = now;
  t.grants = grants;
  int64_t total = 0;
  for (const Grant& g : grants) {
    int64_t& d = device_alloc_[g.device];
    double before = std::min<double>(1.0, static_cast<double>(d) / gpu_);
    d += g.milli_tflops;
    alloc_phys_ += std::min<double>(1.0, static_cast<double>(d) / gpu_) - before;
    alloc_off_ += static_cast<double>(g.milli_tflops) / static_cast<double>(offered_per_gpu_);
    if (d > offered_per_gpu_) ++r_.overallocated_devices;
    total += g.milli_tflops;
  }
  // Quotas: every quota'd prefix of the tenant is charged and checked against its limit.
  for (std::string p = spec.tenant; !p.empty(); p = ParentOf(p)) {
    auto it = groups_.find(p);
    if (it == groups_.end()) continue;
    it->second.used += total;
    if (it->second.limit > 0 && it->second.used > it->second.limit) ++r_.quota_violations;
  }
}

void Recorder::End(size_t task, int64_t now, bool preempted, double lost_gpu_s) {
  Advance(now);
  TaskState& t = tasks_[task];
  if (t.attempt_start < 0) return;
  const TwinTask& spec = w_.tasks[task];
  int64_t total = 0;
  for (const Grant& g : t.grants) {
    int64_t& d = device_alloc_[g.device];
    double before = std::min<double>(1.0, static_cast<double>(d) / gpu_);
    d -= g.milli_tflops;
    alloc_phys_ += std::min<double>(1.0, static_cast<double>(d) / gpu_) - before;
    alloc_off_ -= static_cast<double>(g.milli_tflops) / static_cast<double>(offered_per_gpu_);
    total += g.milli_tflops;
  }
  t.grants.clear();
  for (std::string p = spec.tenant; !p.empty(); p = ParentOf(p)) {
    auto it = groups_.find(p);
    if (it != groups_.end()) it->second.used -= total;
  }
  if (preempted) {
    ++r_.preemptions;
    r_.lost_gpu_s += lost_gpu_s;
    auto min = min_runtime_us_.find(spec.priority_class);
    int64_t min_us = min == min_runtime_us_.end() ? 0 : min->second;
    if (now - t.attempt_start < min_us) ++r_.preempted_before_min_runtime;
    if (t.last_preempted >= 0 && now - t.last_preempted < min_us)
      ++r_.repreempted_within_min_runtime;
    if (++t.preemptions == 2) ++r_.tasks_preempted_twice_or_more;
    r_.max_preemptions_of_a_task = std::max<int64_t>(r_.max_preemptions_of_a_task, t.preemptions);
    t.last_preempted = now;
    StartWaiting(task, now);
  } else {
    demand_ -= spec.GpuMilli();
  }
  t.attempt_start = -1;
}

double Recorder::FragGpus() const {
  // Each partly used device's idle share, weighted by the fraction of the workload's per-device
  // demands that do not fit in it (FGD's measure on one device, CPU left out).
  double frag = 0;
  const double n = static_cast<double>(shapes_.size());
  if (n == 0) return 0;
  for (const auto& [_, alloc] : device_alloc_) {
    if (alloc <= 0) continue;
    double free = 1.0 - static_cast<double>(alloc) / static_cast<double>(offered_per_gpu_);
    if (free <= 0) continue;
    auto above = shapes_.end() - std::upper_bound(shapes_.begin(), shapes_.end(), free);
    frag += free * static_cast<double>(above) / n;
  }
  return frag;
}

void Recorder::Sample(int64_t now, int64_t queue_depth) {
  Advance(now);
  const double gpus = static_cast<double>(w_.GpuCount());
  last_frag_ = FragGpus();
  last_queue_ = queue_depth;
  double interval = last_sample_ < 0 ? 0 : static_cast<double>(now - last_sample_) / kUs;
  last_sample_ = now;
  SeriesPoint p;
  p.t_s = static_cast<double>(now) / kUs;
  p.alloc_pct = 100.0 * alloc_phys_ / gpus;
  p.frag_pct = 100.0 * last_frag_ / gpus;
  p.demand_pct = 100.0 * static_cast<double>(demand_) / 1000.0 / gpus;
  p.queue_depth = queue_depth;
  series_.push_back(p);
  if (now < warmup_us_) return;
  for (auto& [_, g] : groups_) {
    g.share.emplace_back(p.t_s, static_cast<double>(g.used) / gpu_);
    if (g.waiting.empty()) continue;
    ++g.with_waiting;
    // The smallest need among tasks waiting past the grace: would it keep the group within its
    // guarantee? Then the group sits below its guarantee with work waiting: a miss.
    for (const auto& [need, by_since] : g.waiting) {
      if (by_since.begin()->first > now - grace_us_) continue;
      if (g.used + need <= g.guaranteed) {
        ++g.below_samples;
        g.below_s += interval;
      }
      break;
    }
  }
}

TwinReport Recorder::Finish(int64_t horizon_us, int points) {
  Advance(horizon_us);
  TwinReport& r = r_;
  const double gpus = static_cast<double>(w_.GpuCount());
  const double span = static_cast<double>(horizon_us - std::min(warmup_us_, horizon_us)) / kUs;
  r.horizon_s = static_cast<double>(horizon_us) / kUs;
  r.warmup_s = static_cast<double>(warmup_us_) / kUs;
  r.nodes = static_cast<int64_t>(w_.nodes.size());
  r.gpus = w_.GpuCount();
  r.tasks = static_cast<int64_t>(w_.tasks.size());
  r.skipped_cpu_only = w_.skipped;
  if (span > 0) {
    r.time_avg_gpu_allocation_pct = 100.0 * alloc_area_ / span / gpus;
    r.time_avg_gpu_allocation_offered_pct = 100.0 * alloc_off_area_ / span / gpus;
    r.time_avg_demand_pct = 100.0 * demand_area_ / span / gpus;
    r.time_avg_frag_pct = 100.0 * frag_area_ / span / gpus;
    r.time_avg_queue_depth = queue_area_ / span;
  }
  // Tasks still waiting at the horizon count with the wait they have had so far.
  std::map<std::string, int64_t> never_by_class, never_by_tenant, never_by_group;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const TaskState& t = tasks_[i];
    if (t.started_once || t.arrival < warmup_us_ || t.waiting_since < 0) continue;
    const TwinTask& spec = w_.tasks[i];
    double waited = static_cast<double>(horizon_us - t.waiting_since) / kUs;
    waits_by_class_[spec.priority_class].push_back(waited);
    waits_by_tenant_[spec.tenant].push_back(waited);
    ++never_by_class[spec.priority_class];
    ++never_by_tenant[spec.tenant];
    if (!group_of_task_[i].empty()) {
      waits_by_group_[group_of_task_[i]].push_back(waited);
      ++never_by_group[group_of_task_[i]];
    }
  }
  for (auto& [k, v] : waits_by_class_) r.wait_by_class[k] = Stats(std::move(v), never_by_class[k]);
  for (auto& [k, v] : waits_by_tenant_)
    r.wait_by_tenant[k] = Stats(std::move(v), never_by_tenant[k]);
  for (auto& [k, v] : requeue_by_class_) r.requeue_wait_by_class[k] = Stats(std::move(v), 0);
  size_t step =
      points > 0 && series_.size() > static_cast<size_t>(points)
          ? (series_.size() + static_cast<size_t>(points) - 1) / static_cast<size_t>(points)
          : 1;
  for (size_t i = 0; i < series_.size(); i += step) r.series.push_back(series_[i]);
  for (auto& [path, g] : groups_) {
    TenantReport t;
    t.tenant = path;
    t.guaranteed_gpus = static_cast<double>(g.guaranteed) / gpu_;
    t.limit_gpus = static_cast<double>(g.limit) / gpu_;
    t.time_avg_gpus = span > 0 ? g.area / span : 0;
    t.below_guarantee_samples = g.below_samples;
    t.below_guarantee_s = g.below_s;
    t.samples_with_waiting = g.with_waiting;
    t.wait = Stats(std::move(waits_by_group_[path]), never_by_group[path]);
    for (size_t i = 0; i < g.share.size(); i += step) t.share.push_back(g.share[i]);
    r.tenants.push_back(std::move(t));
  }
  return r;
}

}  // namespace gpupool::twin
