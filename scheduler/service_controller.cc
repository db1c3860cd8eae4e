#include "scheduler/service_controller.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "scheduler/tenancy.h"

namespace gpupool {

struct ServiceController::Life {
  std::mutex mu;
  bool alive = true;
};

struct ServiceController::Replica {
  int64_t job_id = 0;
  int64_t generation = 0;
  TaskState state = TaskState::kPending;
  std::string node;
  std::vector<TaskEndpoint> endpoints;
  std::string reason;
  Preemption preempted_by;
  PendingVerdict pending;
  int64_t running_since_ms = 0;  // 0: not RUNNING
  bool cancelling = false;       // this controller asked it to stop
  bool ready() const { return state == TaskState::kRunning && !cancelling; }
};

struct ServiceController::Service {
  Service(ServiceRecord r, int64_t hold_ms)
      : record(std::move(r)), autoscaler(ScalerOptions(record.spec, hold_ms)) {}

  static AutoscalerOptions ScalerOptions(const ServiceSpec& s, int64_t hold_ms) {
    AutoscalerOptions o;
    o.min_replicas = s.min_replicas;
    o.max_replicas = s.max_replicas;
    o.target_in_flight = s.target_in_flight;
    o.idle_to_zero_ms = s.idle_ms;
    o.hold_ms = hold_ms;
    return o;
  }

  ServiceRecord record;
  Autoscaler autoscaler;
  bool reported = false;  // the gateway has reported its load at least once
  int32_t desired = 0;
  std::string desired_reason;
  std::map<int64_t, Replica> replicas;    // live ones, by job id
  std::map<int64_t, int32_t> submitting;  // generation → submissions in flight
  int32_t failures = 0;                   // consecutive replica failures
  int64_t backoff_until_ms = 0;
  std::string last_failure;
  int64_t cold_starts = 0;
  int64_t last_cold_start_ms = 0;
  // What its events last told (service.degraded / service.recovered, service.rollout_done):
  // the code of the shortfall reported ("" when none), and whether a rollout is under way.
  std::string degraded_code;
  bool rolling = false;
  bool planned = false;  // `desired` was decided (a pass ran, or Create set it)
};

struct ServiceController::Action {
  enum Kind { kSubmit, kCancel, kRefresh, kEvent } kind = kSubmit;
  int64_t service_id = 0;
  int64_t generation = 0;
  JobSpec spec;
  int64_t job_id = 0;
  std::string reason;
  EventRecord event = {};  // kEvent
};

namespace {

std::string Describe(const std::string& tenant, const std::string& name) {
  return "service '" + name + "' of tenant '" + tenant + "'";
}

// A service's event, as its tenant's webhooks get it: subject "service/<id>", the message led by
// the service's name.
EventRecord ServiceEvent(const ServiceRecord& r, std::string kind, const std::string& what) {
  EventRecord e;
  e.kind = std::move(kind);
  e.subject = "service/" + std::to_string(r.id);
  e.message = r.spec.name + ": " + what;
  e.tenant = r.spec.tenant;
  return e;
}

std::string Seconds(int64_t ms) { return std::to_string((ms + 999) / 1000) + " s"; }

// The sentence a pending replica's verdict stands for.
std::string PendingText(const PendingVerdict& v) {
  std::string out(ToString(v.code));
  if (!v.binding.empty()) out += " (" + v.binding + ")";
  for (size_t i = 0; i < v.nodes_by_reason.size(); ++i) {
    out += (i == 0 ? " (nodes refusing it: " : ", ") + v.nodes_by_reason[i].first + " " +
           std::to_string(v.nodes_by_reason[i].second);
  }
  if (!v.nodes_by_reason.empty()) out += ")";
  return out;
}

}  // namespace

ServiceController::ServiceController(ServiceStore* store, JobsPort* jobs, Clock* clock,
                                     ServiceControllerOptions options)
    : store_(store),
      jobs_(jobs),
      clock_(clock),
      options_(options),
      life_(std::make_shared<Life>()) {}

ServiceController::~ServiceController() {
  Stop();
  std::lock_guard g(life_->mu);
  life_->alive = false;
}

Status ServiceController::Start() {
  Result<std::vector<ServiceRecord>> stored = store_->List();
  if (!stored.ok()) return stored.status().WithContext("services");
  // Every unfinished replica, by paging through the jobs port.
  std::vector<JobRecord> replicas;
  for (int64_t after = 0;;) {
    JobFilter f;
    f.replicas_only = true;
    f.unfinished_only = true;
    f.after_id = after;
    f.limit = 1000;
    auto page = CallAndGet<JobPage>([&](SchedulerCallback<JobPage> done) {
      jobs_->ListJobs(f, [done](JobPage p) { done(std::move(p)); });
    });
    if (!page.ok()) return page.status();
    for (JobRecord& j : page->jobs) replicas.push_back(std::move(j));
    if (page->next_after_id == 0) break;
    after = page->next_after_id;
  }
  {
    std::lock_guard lock(mu_);
    started_ms_ = NowMs();
    for (ServiceRecord& r : *stored) {
      const int64_t id = r.id;
      services_[id] = std::make_unique<Service>(std::move(r), options_.hold_ms);
    }
    for (const JobRecord& j : replicas) {
      auto it = services_.find(j.spec.service_id);
      if (it == services_.end()) {
        orphans_[j.id] = false;  // its service was deleted before its replicas stopped
        continue;
      }
      Replica& r = it->second->replicas[j.id];
      r.job_id = j.id;
      r.generation = j.spec.service_generation;
    }
  }
  for (const JobRecord& j : replicas) Watch(j.id);
  LogInfo("service", "services recovered",
          {{"services", std::to_string(stored->size())},
           {"replicas", std::to_string(replicas.size())}});
  if (options_.tick.count() > 0) thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void ServiceController::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<int64_t> watches;
  {
    std::lock_guard lock(mu_);
    watches.swap(watch_ids_);
  }
  for (int64_t id : watches) jobs_->Unwatch(id);
}

void ServiceController::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void ServiceController::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, options_.tick, [this] { return stopping_ || wake_; });
      if (stopping_) return;
      wake_ = false;
    }
    Reconcile();
  }
}

// ---- Changes from the API ----

Result<ServiceView> ServiceController::Create(ServiceSpec spec) {
  if (Status s = CheckServiceSpec(spec); !s.ok()) return s;
  std::lock_guard write(write_mu_);
  ServiceRecord rec;
  rec.spec = std::move(spec);
  rec.generation = 1;
  rec.create_ms = rec.update_ms = NowMs();
  Result<ServiceRecord> stored = store_->Create(rec);
  if (!stored.ok()) return stored.status();
  ServiceView view;
  {
    std::lock_guard lock(mu_);
    auto s = std::make_unique<Service>(*stored, options_.hold_ms);
    // What the first pass will decide (no load reported yet): its minimum, starting.
    s->desired = stored->spec.min_replicas;
    s->desired_reason = "holding " + std::to_string(s->desired) + " until the gateway reports load";
    s->planned = true;
    view = ViewLocked(*s);
    services_[stored->id] = std::move(s);
    wake_ = true;
  }
  cv_.notify_all();
  RecordEvent(ServiceEvent(*stored, "service.created",
                           "created in pool " + stored->spec.pool + ", " +
                               std::to_string(stored->spec.min_replicas) + ".." +
                               std::to_string(stored->spec.max_replicas) + " replicas"));
  LogInfo("service", "service created",
          {{"service", stored->spec.name},
           {"tenant", stored->spec.tenant},
           {"id", std::to_string(stored->id)}});
  return view;
}

Result<ServiceRecord> ServiceController::CheckedRecord(const std::string& tenant,
                                                       const std::string& name,
                                                       const ServiceCheck& check) const {
  ServiceRecord current;
  {
    std::lock_guard lock(mu_);
    const Service* s = FindLocked(tenant, name);
    if (s == nullptr) return Status::NotFound(Describe(tenant, name) + " not found");
    current = s->record;
  }
  if (check) GPUPOOL_RETURN_IF_ERROR(check(current));
  return current;
}

Result<ServiceView> ServiceController::Update(const std::string& tenant, const std::string& name,
                                              const ServiceCheck& check,
                                              const std::function<Status(ServiceSpec*)>& edit) {
  std::lock_guard write(write_mu_);
  Result<ServiceRecord> found = CheckedRecord(tenant, name, check);
  if (!found.ok()) return found.status();
  const ServiceRecord current = std::move(*found);
  ServiceSpec next = current.spec;
  GPUPOOL_RETURN_IF_ERROR(edit(&next));
  if (next.tenant != current.spec.tenant || next.name != current.spec.name) {
    return Status::InvalidArgument("service: the tenant and name of a service never change");
  }
  if (next.pool != current.spec.pool) {
    return Status::InvalidArgument("service.pool: a service's pool never changes (create another)");
  }
  next.created_by = current.spec.created_by;
  GPUPOOL_RETURN_IF_ERROR(CheckServiceSpec(next));
  ServiceRecord rec = current;
  rec.update_ms = NowMs();
  if (next.revision != current.spec.revision) {
    rec.generation = current.generation + 1;
    rec.previous = current.spec.revision;
  }
  rec.spec = std::move(next);
  GPUPOOL_RETURN_IF_ERROR(store_->Update(rec, current.generation));
  ServiceView view;
  {
    std::lock_guard lock(mu_);
    auto it = services_.find(rec.id);
    if (it == services_.end()) return Status::NotFound(Describe(tenant, name) + " not found");
    Service& s = *it->second;
    if (s.record.spec.min_replicas != rec.spec.min_replicas ||
        s.record.spec.max_replicas != rec.spec.max_replicas ||
        s.record.spec.target_in_flight != rec.spec.target_in_flight ||
        s.record.spec.idle_ms != rec.spec.idle_ms) {
      s.autoscaler = Autoscaler(Service::ScalerOptions(rec.spec, options_.hold_ms));
    }
    if (rec.generation != s.record.generation) {
      s.failures = 0;  // a new revision starts with a clean slate
      s.backoff_until_ms = 0;
      s.last_failure.clear();
    }
    s.record = rec;
    view = ViewLocked(s);
    wake_ = true;
  }
  cv_.notify_all();
  RecordEvent(ServiceEvent(rec, "service.updated",
                           rec.generation != current.generation
                               ? "generation " + std::to_string(rec.generation) + ", rolling out"
                               : "scaling changed: " + std::to_string(rec.spec.min_replicas) +
                                     ".." + std::to_string(rec.spec.max_replicas) + " replicas"));
  LogInfo("service", "service updated",
          {{"service", name}, {"tenant", tenant}, {"generation", std::to_string(rec.generation)}});
  return view;
}

Result<ServiceView> ServiceController::Rollback(const std::string& tenant, const std::string& name,
                                                const ServiceCheck& check) {
  // The previous revision is read inside Update's edit, under its write lock: a change that
  // lands meanwhile cannot make the rollback restore a revision that is no longer the previous.
  return Update(tenant, name, check, [&](ServiceSpec* spec) {
    std::lock_guard lock(mu_);
    const Service* s = FindLocked(tenant, name);
    if (s == nullptr) return Status::NotFound(Describe(tenant, name) + " not found");
    if (!s->record.previous) {
      return Status::FailedPrecondition(Describe(tenant, name) +
                                        " has no previous revision to roll back to");
    }
    spec->revision = *s->record.previous;
    return Status::Ok();
  });
}

Status ServiceController::Delete(const std::string& tenant, const std::string& name,
                                 const ServiceCheck& check) {
  std::lock_guard write(write_mu_);
  Result<ServiceRecord> found = CheckedRecord(tenant, name, check);
  if (!found.ok()) return found.status();
  const ServiceRecord current = std::move(*found);
  GPUPOOL_RETURN_IF_ERROR(store_->Delete(current.id));  // the record first: then the replicas
  {
    std::lock_guard lock(mu_);
    auto it = services_.find(current.id);
    if (it != services_.end()) {
      for (const auto& [job_id, replica] : it->second->replicas) orphans_[job_id] = false;
      services_.erase(it);
    }
    wake_ = true;
  }
  cv_.notify_all();
  RecordEvent(ServiceEvent(current, "service.deleted", "deleted; its replicas are stopped"));
  LogInfo("service", "service deleted", {{"service", name}, {"tenant", tenant}});
  return Status::Ok();
}

Result<ServiceView> ServiceController::Get(const std::string& tenant,
                                           const std::string& name) const {
  std::lock_guard lock(mu_);
  const Service* s = FindLocked(tenant, name);
  if (s == nullptr) return Status::NotFound(Describe(tenant, name) + " not found");
  return ViewLocked(*s);
}

std::vector<ServiceView> ServiceController::List(const std::string& tenant_prefix) const {
  std::vector<ServiceView> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : services_) {
    if (tenant_prefix.empty() || TenantWithin(s->record.spec.tenant, tenant_prefix)) {
      out.push_back(ViewLocked(*s));
    }
  }
  std::sort(out.begin(), out.end(), [](const ServiceView& a, const ServiceView& b) {
    const ServiceSpec &x = a.record.spec, &y = b.record.spec;
    return std::tie(x.tenant, x.name) < std::tie(y.tenant, y.name);
  });
  return out;
}

void ServiceController::ReportLoad(int64_t service_id, const ServiceLoadSample& sample) {
  std::lock_guard lock(mu_);
  auto it = services_.find(service_id);
  if (it == services_.end()) return;
  ServiceLoadSample seen = sample;
  // The gateway sees requests; how long a cold start held the first one is known here.
  if (seen.cold_start_s == 0)
    seen.cold_start_s = static_cast<double>(it->second->last_cold_start_ms) / 1000;
  it->second->autoscaler.Observe(NowMs(), seen);
  it->second->reported = true;
}

void ServiceController::ReportColdStart(int64_t service_id, int64_t wait_ms) {
  std::lock_guard lock(mu_);
  auto it = services_.find(service_id);
  if (it == services_.end()) return;
  it->second->cold_starts += 1;
  it->second->last_cold_start_ms = wait_ms;
}

ServiceController::Service* ServiceController::FindLocked(const std::string& tenant,
                                                          const std::string& name) {
  for (auto& [id, s] : services_) {
    if (s->record.spec.tenant == tenant && s->record.spec.name == name) return s.get();
  }
  return nullptr;
}

const ServiceController::Service* ServiceController::FindLocked(const std::string& tenant,
                                                                const std::string& name) const {
  return const_cast<ServiceController*>(this)->FindLocked(tenant, name);
}

ServiceView ServiceController::ViewLocked(const Service& s) const {
  ServiceView v;
  v.record = s.record;
  v.desired = s.desired;
  v.desired_reason = s.desired_reason;
  std::tie(v.below_code, v.below_reason) = BelowLocked(s, NowMs());
  v.consecutive_failures = s.failures;
  v.cold_starts = s.cold_starts;
  v.last_cold_start_ms = s.last_cold_start_ms;
  for (const auto& [id, r] : s.replicas) {
    if (r.cancelling) continue;
    ServiceReplicaView rv;
    rv.job_id = id;
    rv.generation = r.generation;
    rv.state = r.state;
    rv.ready = r.ready();
    rv.node = r.node;
    rv.endpoints = r.endpoints;
    rv.reason = r.state == TaskState::kPending && r.pending.code != PendingCode::kNone
                    ? PendingText(r.pending)
                    : r.reason;
    if (rv.ready) ++v.ready;
    if (r.generation == s.record.generation) ++v.updated;
    v.replicas.push_back(std::move(rv));
  }
  return v;
}

// ---- The pass ----

void ServiceController::Reconcile() {
  std::vector<Action> actions;
  {
    std::lock_guard lock(mu_);
    actions = PlanLocked(NowMs());
  }
  Execute(std::move(actions));
}

std::vector<ServiceController::Action> ServiceController::PlanLocked(int64_t now_ms) {
  std::vector<Action> out;
  for (auto& [job_id, asked] : orphans_) {
    if (asked) continue;
    asked = true;
    out.push_back({Action::kCancel, 0, 0, {}, job_id, "its service was deleted"});
  }
  for (auto& [id, s] : services_) PlanService(*s, now_ms, &out);
  return out;
}

void ServiceController::PlanService(Service& s, int64_t now_ms, std::vector<Action>* out) {
  const ServiceSpec& spec = s.record.spec;
  const int64_t gen = s.record.generation;
  auto cancel = [&](Replica& r, const std::string& why) {
    r.cancelling = true;
    out->push_back({Action::kCancel, s.record.id, r.generation, {}, r.job_id, why});
  };

  // Counts: live replicas (not being stopped) and submissions in flight.
  // Submissions in flight count as live replicas of their generation.
  int32_t cur = 0, old = 0, ready = 0;
  for (auto& [g, n] : s.submitting) (g == gen ? cur : old) += n;
  for (auto& [id, r] : s.replicas) {
    if (r.cancelling) continue;
    (r.generation == gen ? cur : old) += 1;
    if (r.ready()) ++ready;
    // A replica that has served a while clears the back-off.
    if (r.running_since_ms > 0 && now_ms - r.running_since_ms >= options_.healthy_after_ms &&
        s.failures > 0) {
      s.failures = 0;
      s.backoff_until_ms = 0;
      s.last_failure.clear();
    }
  }
  const int32_t live = cur + old;
  const int32_t desired_before = s.desired;

  // The desired count. Before its first load report (a new leader, a new service) a service
  // holds what it has, at least min, for its idle period.
  if (!s.reported && now_ms - started_ms_ < spec.idle_ms) {
    s.desired = std::clamp(std::max(live, spec.min_replicas), spec.min_replicas, spec.max_replicas);
    s.desired_reason = "holding " + std::to_string(s.desired) + " until the gateway reports load";
  } else {
    AutoscaleDecision d = s.autoscaler.Decide(now_ms, live);
    s.desired = std::clamp(d.replicas, spec.min_replicas, spec.max_replicas);
    s.desired_reason = std::move(d.reason);
  }
  const int32_t desired = s.desired;
  const bool was_planned = s.planned;
  s.planned = true;
  const bool backing_off = now_ms < s.backoff_until_ms;
  // A new leader's first pass decides what it holds: not a change to tell of.
  if (was_planned && desired != desired_before) {
    out->push_back(
        EventAction(ServiceEvent(s.record, "service.scaled",
                                 std::to_string(desired_before) + " → " + std::to_string(desired) +
                                     " replicas: " + s.desired_reason)));
  }
  if (old > 0) {
    s.rolling = true;
  } else if (s.rolling && cur >= desired) {
    s.rolling = false;
    out->push_back(EventAction(ServiceEvent(s.record, "service.rollout_done",
                                            "generation " + std::to_string(gen) + " rolled out, " +
                                                std::to_string(cur) + " replicas")));
  }

  // Replicas by preference to stop: not ready first, then the newest.
  auto victims = [&](bool of_current) {
    std::vector<Replica*> v;
    for (auto& [id, r] : s.replicas) {
      if (!r.cancelling && (r.generation == gen) == of_current) v.push_back(&r);
    }
    std::sort(v.begin(), v.end(), [](const Replica* a, const Replica* b) {
      if (a->ready() != b->ready()) return !a->ready();
      return a->job_id > b->job_id;
    });
    return v;
  };

  int32_t to_start = 0;
  if (old == 0) {
    to_start = desired - cur;
    if (cur > desired) {
      int32_t extra = cur - desired;
      for (Replica* r : victims(true)) {
        if (extra-- <= 0) break;
        cancel(*r, "scaled down to " + std::to_string(desired));
      }
    }
  } else {
    // A rollout: new replicas within desired + surge in all, old ones stopped while enough stay
    // ready.
    to_start = std::min(desired - cur, desired + spec.max_surge - live);
    const int32_t min_ready = desired - spec.max_unavailable;
    int32_t ready_left = ready;
    for (Replica* r : victims(false)) {
      if (r->ready()) {
        if (ready_left - 1 < min_ready) continue;
        --ready_left;
      }
      cancel(*r, "replaced by generation " + std::to_string(gen));
    }
    if (cur > desired) {
      int32_t extra = cur - desired;
      for (Replica* r : victims(true)) {
        if (extra-- <= 0) break;
        cancel(*r, "scaled down to " + std::to_string(desired));
      }
    }
  }
  if (to_start > 0 && !backing_off) {
    for (int32_t i = 0; i < to_start; ++i) {
      JobSpec js;
      js.tenant = spec.tenant;
      js.pool = spec.pool;
      js.priority_class = spec.priority_class;
      js.task_count = 1;
      js.preemptible = spec.preemptible;
      js.task_template = spec.revision.task_template;
      js.submitted_by = spec.created_by;
      js.service_id = s.record.id;
      js.service_name = spec.name;
      js.service_generation = gen;
      s.submitting[gen] += 1;
      out->push_back({Action::kSubmit, s.record.id, gen, std::move(js), 0, ""});
    }
  }

  // Below desired for a reason a tenant can act on (STARTING is every scale-up's): told once per
  // reason, and once when it is over.
  const auto [code, why] = BelowLocked(s, now_ms);
  if (!code.empty() && code != "STARTING" && code != s.degraded_code) {
    s.degraded_code = code;
    out->push_back(EventAction(ServiceEvent(s.record, "service.degraded", code + ": " + why)));
  } else if (code.empty() && !s.degraded_code.empty()) {
    s.degraded_code.clear();
    out->push_back(EventAction(ServiceEvent(
        s.record, "service.recovered",
        std::to_string(desired) + " of " + std::to_string(desired) + " replicas ready")));
  }

  // Pending replicas: their verdicts change without a job event, so they are read again.
  for (auto& [id, r] : s.replicas) {
    if (!r.cancelling && r.state == TaskState::kPending) {
      out->push_back({Action::kRefresh, s.record.id, r.generation, {}, id, ""});
    }
  }
}

// Why fewer are ready than desired, from what is known now ("" when not short).
std::pair<std::string, std::string> ServiceController::BelowLocked(const Service& s,
                                                                   int64_t now_ms) const {
  int32_t live = 0, ready = 0;
  for (const auto& [g, n] : s.submitting) live += n;
  for (const auto& [id, r] : s.replicas) {
    if (r.cancelling) continue;
    ++live;
    if (r.ready()) ++ready;
  }
  if (ready >= s.desired) return {};
  const std::string short_by =
      std::to_string(ready) + " of " + std::to_string(s.desired) + " replicas ready";
  if (now_ms < s.backoff_until_ms) {
    return {"REPLICA_FAILING", short_by + ": " + s.last_failure + "; next start in " +
                                   Seconds(s.backoff_until_ms - now_ms) + " (" +
                                   std::to_string(s.failures) + " failures in a row)"};
  }
  for (const auto& [id, r] : s.replicas) {
    if (!r.cancelling && r.state == TaskState::kPending && !r.preempted_by.empty()) {
      return {"PREEMPTED", short_by + ": replica job " + std::to_string(id) + " was " +
                               Describe(r.preempted_by) + "; it waits to be placed again"};
    }
  }
  for (const auto& [id, r] : s.replicas) {
    if (!r.cancelling && r.state == TaskState::kPending && r.pending.code != PendingCode::kNone &&
        r.pending.code != PendingCode::kQueued) {
      return {std::string(ToString(r.pending.code)), short_by + ": replica job " +
                                                         std::to_string(id) + " is pending, " +
                                                         PendingText(r.pending)};
    }
  }
  if (!s.last_failure.empty() && s.failures > 0) {
    return {"REPLICA_FAILING", short_by + ": " + s.last_failure};
  }
  return {"STARTING", short_by + ": " + std::to_string(live - ready) + " starting"};
}

void ServiceController::BackOff(Service& s, std::string why, int64_t now_ms) const {
  s.failures += 1;
  s.last_failure = std::move(why);
  s.backoff_until_ms =
      now_ms + std::min<int64_t>(options_.max_backoff_ms,
                                 options_.min_backoff_ms << std::min(s.failures - 1, 20));
}

void ServiceController::Execute(std::vector<Action> actions) {
  for (Action& a : actions) {
    switch (a.kind) {
      case Action::kSubmit:
        Submit(a.service_id, a.generation, std::move(a.spec));
        break;
      case Action::kCancel:
        Cancel(a.job_id, std::move(a.reason));
        break;
      case Action::kRefresh:
        Refresh(a.job_id);
        break;
      case Action::kEvent:
        RecordEvent(std::move(a.event));
        break;
    }
  }
}

ServiceController::Action ServiceController::EventAction(EventRecord e) {
  Action a;
  a.kind = Action::kEvent;
  a.event = std::move(e);
  return a;
}

void ServiceController::RecordEvent(EventRecord e) {
  const std::string kind = e.kind, subject = e.subject;
  jobs_->RecordEvent(std::move(e), [kind, subject](Result<bool> r) {
    if (!r.ok()) {
      LogWarn("service", "service event not recorded",
              {{"kind", kind}, {"subject", subject}, {"error", r.status().ToString()}});
    }
  });
}

void ServiceController::Submit(int64_t service_id, int64_t generation, JobSpec spec) {
  jobs_->SubmitJob(std::move(spec), [this, life = life_, service_id,
                                     generation](Result<JobRecord> job) {
    std::lock_guard g(life->mu);
    if (!life->alive) return;
    bool watch = false;
    {
      std::lock_guard lock(mu_);
      auto it = services_.find(service_id);
      Service* s = it == services_.end() ? nullptr : it->second.get();
      if (s != nullptr) {
        if (--s->submitting[generation] <= 0) s->submitting.erase(generation);
      }
      if (!job.ok()) {
        // A refused start backs off as a failed replica does (a pool or class that went).
        if (s != nullptr) {
          BackOff(*s, "a replica's job was refused: " + job.status().ToString(), NowMs());
        }
        LogWarn("service", "replica not submitted",
                {{"service_id", std::to_string(service_id)}, {"error", job.status().ToString()}});
        return;
      }
      if (s == nullptr) {
        orphans_[job->id] = false;  // deleted meanwhile: the next pass cancels it
      } else {
        Replica& r = s->replicas[job->id];
        r.job_id = job->id;
        r.generation = generation;
      }
      watch = true;
    }
    if (watch) Watch(job->id);
  });
}

void ServiceController::Watch(int64_t job_id) {
  std::weak_ptr<Life> weak = life_;
  jobs_->WatchJob(
      job_id, [](const JobRecord&) { return Status::Ok(); },
      [this, weak](const JobChange& change) {
        std::shared_ptr<Life> life = weak.lock();
        if (life == nullptr) return;
        std::lock_guard g(life->mu);
        if (life->alive) OnJob(change.job);
      },
      [this, weak](Result<int64_t> id) {
        std::shared_ptr<Life> life = weak.lock();
        if (life == nullptr || !id.ok() || *id == 0) return;
        std::lock_guard g(life->mu);
        if (!life->alive) return;
        std::lock_guard lock(mu_);
        watch_ids_.push_back(*id);
      });
}

void ServiceController::Refresh(int64_t job_id) {
  std::weak_ptr<Life> weak = life_;
  jobs_->GetJob(job_id, [this, weak](Result<JobRecord> job) {
    std::shared_ptr<Life> life = weak.lock();
    if (life == nullptr || !job.ok()) return;
    std::lock_guard g(life->mu);
    if (life->alive) OnJob(*job);
  });
}

void ServiceController::Cancel(int64_t job_id, std::string reason) {
  std::weak_ptr<Life> weak = life_;
  jobs_->CancelJob(
      job_id, std::move(reason), [](const JobRecord&) { return Status::Ok(); },
      [this, weak, job_id](Result<JobRecord> job) {
        std::shared_ptr<Life> life = weak.lock();
        if (life == nullptr) return;
        std::lock_guard g(life->mu);
        if (life->alive) CancelDone(job_id, job.status());
      });
}

void ServiceController::CancelDone(int64_t job_id, const Status& st) {
  if (st.ok()) return;  // the watch sees it end
  std::lock_guard lock(mu_);
  // The store was out: ask again next pass. Anything else (it had ended) is final.
  const bool again = st.code() == StatusCode::kUnavailable;
  if (auto o = orphans_.find(job_id); o != orphans_.end()) {
    if (again) {
      o->second = false;
    } else {
      orphans_.erase(o);
    }
    return;
  }
  for (auto& [id, s] : services_) {
    auto r = s->replicas.find(job_id);
    if (r == s->replicas.end()) continue;
    if (again) r->second.cancelling = false;
    return;
  }
}

void ServiceController::OnJob(const JobRecord& job) {
  std::lock_guard lock(mu_);
  const bool ended = IsTerminal(job.state);
  if (auto o = orphans_.find(job.id); o != orphans_.end()) {
    if (ended) orphans_.erase(o);
    return;
  }
  auto it = services_.find(job.spec.service_id);
  if (it == services_.end()) {
    if (!ended) orphans_[job.id] = false;
    return;
  }
  Service& s = *it->second;
  auto rit = s.replicas.find(job.id);
  if (rit == s.replicas.end()) return;  // already ended and removed
  Replica& r = rit->second;
  const TaskRecord* t = job.tasks.empty() ? nullptr : &job.tasks.front();
  if (t != nullptr) {
    r.state = t->state;
    r.node = t->node;
    r.endpoints = t->endpoints;
    r.reason = t->reason;
    r.preempted_by = t->preempted_by;
    r.pending = t->pending;
  }
  const int64_t now = NowMs();
  if (r.state == TaskState::kRunning) {
    if (r.running_since_ms == 0) r.running_since_ms = now;
  } else {
    r.running_since_ms = 0;
  }
  if (!ended) return;
  if (!r.cancelling && job.state != JobState::kCancelled) {
    // It died: replaced by the next pass, after a back-off.
    const int32_t code = t != nullptr ? t->exit_code : 0;
    BackOff(s,
            "replica job " + std::to_string(job.id) +
                (job.state == JobState::kSucceeded
                     ? " exited (code 0)"
                     : " failed" + (t != nullptr && !t->reason.empty()
                                        ? ": " + t->reason
                                        : " (exit code " + std::to_string(code) + ")")),
            now);
    LogWarn("service", "replica ended",
            {{"service", s.record.spec.name},
             {"job", std::to_string(job.id)},
             {"reason", s.last_failure}});
  }
  s.replicas.erase(rit);
  wake_ = true;
  cv_.notify_all();
}

}  // namespace gpupool
