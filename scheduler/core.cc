// Core: construction, admission, jobs and watchers (cancel: core_cancel.cc; retention:
// core_retention.cc).
// Scheduling passes live in core_schedule.cc, agent events in core_agents.cc.
#include "scheduler/core.h"

#include <algorithm>
#include <set>

#include "base/log.h"
#include "scheduler/core_state.h"
#include "scheduler/pool_workload.h"

namespace gpupool {

Core::Core(SchedulerOptions options, Clock* clock, Store* store, AgentGateway* agents,
           Executor executor, SchedulerMetrics* metrics)
    : s_(std::make_unique<State>()) {
  s_->book = TenantBook(options.tenancy.fair_share_half_life_ms);
  s_->order = MakeQueueOrder(options.tenancy.queue_order);
  s_->options = std::move(options);
  s_->clock = clock;
  s_->store = store;
  s_->agents = agents;
  s_->executor = std::move(executor);
  s_->metrics = metrics;
  State* s = s_.get();
  s_->dispatcher = Dispatcher(
      agents, s_->options.stop_grace_period_ms,
      [s](const std::string& node) -> const NodeRecord* {
        auto it = s->nodes.find(node);
        return it == s->nodes.end() ? nullptr : &it->second.rec;
      },
      [s](const std::string& pool) -> const PoolRecord* {
        const PoolEntry* p = s->FindPool(pool);
        return p == nullptr ? nullptr : &p->rec;
      });
}

Core::~Core() = default;

int64_t Core::epoch() const { return s_->epoch; }
size_t Core::pending_tasks() const { return s_->queue.size(); }
size_t Core::running_tasks() const { return s_->running; }
size_t Core::unstored_changes() const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  return s_->unstored.size() + (s_->retry_in_flight ? 1 : 0) + s_->dirty_tasks.size() +
         s_->dirty_jobs.size() + s_->dirty_nodes.size() + s_->unstored_events.size();
}

Status Core::CheckInvariants() const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  return s_->jobs.CheckIndexes();
}

// ---------------------------------------------------------------------------------------------
// State helpers

void Core::State::Persist(std::vector<Mutation> batch, std::function<void(Status)> then) {
  Executor exec = executor;
  store->Apply(std::move(batch), [exec, then = std::move(then)](Status st) mutable {
    exec([then = std::move(then), st = std::move(st)]() mutable { then(std::move(st)); });
  });
}

void Core::State::RequestSchedule(Core* core, bool full) {
  full_pass_needed = full_pass_needed || full;
  if (schedule_posted) return;
  schedule_posted = true;
  executor([core] { core->RunPass(); });
}

EventRecord Core::State::Event(std::string kind, std::string subject, std::string message,
                               std::string tenant) const {
  return EventRecord{clock->NowMicros(), std::move(kind), std::move(subject), std::move(message),
                     std::move(tenant)};
}

PoolEntry* Core::State::FindPool(const std::string& name) {
  auto it = pools.find(name);
  return it == pools.end() ? nullptr : &it->second;
}

int32_t Core::State::RetryLimit(const JobEntry& job) const {
  constexpr int32_t kDefaultRetries = 3;
  return job.head.spec.max_retries > 0 ? job.head.spec.max_retries : kDefaultRetries;
}

void Core::State::ReleaseTask(JobEntry& job, int32_t index) {
  Task& rt = job.task(index);
  Uncharge(job, index);
  Reservation* res = rt.reserved_for != 0 ? reservations.Find(rt.reserved_for) : nullptr;
  rt.reserved_for = 0;
  if (res != nullptr) res->victims.erase(TaskId(job.head.id, index));
  if (!rt.holds) return;
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (res != nullptr && res->allocation.node == rt.allocation.node) {
    // A victim's room stays committed for the preemptor that waits for it.
    res->held.push_back(rt.allocation);
  } else if (pool != nullptr) {
    Status st = pool->engine->Release(rt.allocation);
    if (!st.ok()) {
      LogError("core", "release failed",
               {{"task", TaskId(job.head.id, index)}, {"error", st.ToString()}});
    }
  }
  rt.holds = false;
  rt.committing = false;
  rt.allocation = {};
  if (running > 0) --running;
}

void Core::State::Notify(const JobEntry& job, const std::string& message) {
  auto [lo, hi] = watchers_by_job.equal_range(job.head.id);
  if (lo == hi) return;
  JobChange change{job.Record(), message, clock->NowMicros()};
  std::vector<int64_t> ids;
  for (auto it = lo; it != hi; ++it) ids.push_back(it->second);
  for (int64_t id : ids) {
    auto w = watchers.find(id);
    if (w != watchers.end()) w->second.fn(change);
  }
  if (IsTerminal(job.head.state)) {
    for (int64_t id : ids) watchers.erase(id);
    watchers_by_job.erase(job.head.id);
  }
}

// ---------------------------------------------------------------------------------------------
// Admission

namespace {

std::string KnownNames(const auto& table) {
  std::string known;
  for (const auto& [n, _] : table) known += (known.empty() ? "" : ", ") + n;
  return known;
}

// The priority class a spec names (or the default), by value.
Status ResolveClass(const SchedulerOptions& options, const JobSpec& spec, int32_t* priority) {
  const std::string& cls_name =
      spec.priority_class.empty() ? options.default_priority_class : spec.priority_class;
  auto cls = options.priority_classes.find(cls_name);
  if (cls == options.priority_classes.end()) {
    return Status::NotFound("spec.priority_class: priority class '" + cls_name +
                            "' not found (known: " + KnownNames(options.priority_classes) + ")");
  }
  *priority = cls->second.value;
  return Status::Ok();
}

// A private pool admits only its allowed tenants (and their sub-tenants).
Status CheckAccess(const PoolRecord& pool, const JobSpec& spec) {
  if (pool.visibility != Visibility::kPrivate) return Status::Ok();
  for (const std::string& t : pool.allowed_tenants) {
    if (TenantWithin(spec.tenant, t)) return Status::Ok();
  }
  return Status::PermissionDenied("tenant '" + spec.tenant + "' may not use private pool '" +
                                  spec.pool + "'");
}

// The template's request with a SKU replaced by what the SKU stands for (its own cpu and memory
// kept when the template names them).
Status ResolveSku(const SchedulerOptions& options, ResourceRequest* request) {
  if (request->shape != RequestShape::kSku) return Status::Ok();
  auto sku = options.skus.find(request->sku);
  if (sku == options.skus.end()) {
    return Status::NotFound("spec.template.resources.sku: sku '" + request->sku +
                            "' not found (known: " + KnownNames(options.skus) + ")");
  }
  ResourceRequest resolved = sku->second.request;
  if (request->cpu_milli > 0) resolved.cpu_milli = request->cpu_milli;
  if (request->memory_mib > 0) resolved.memory_mib = request->memory_mib;
  resolved.sku = request->sku;
  *request = resolved;
  return Status::Ok();
}

// A request no device of the pool could ever hold is refused now rather than left pending.
Status CheckWithinLimits(const PoolLimits& lim, const std::string& pool,
                         const ResourceRequest& request) {
  switch (request.shape) {
    case RequestShape::kFractional:
      if (!lim.largest_device.Fits(request.fractional)) {
        return Status::InvalidArgument(
            "spec.template.resources.fractional: " + request.fractional.ToString() +
            " is larger than any device in pool '" + pool + "' (largest offers " +
            lim.largest_device.ToString() + ")");
      }
      break;
    case RequestShape::kWholeGpus:
      if (request.gpu_count > lim.most_gpus_on_node) {
        return Status::InvalidArgument(
            "spec.template.resources.whole_gpus.count: " + std::to_string(request.gpu_count) +
            " GPUs, but no node in pool '" + pool + "' has more than " +
            std::to_string(lim.most_gpus_on_node));
      }
      for (const std::string& m : request.models) {
        if (!lim.models.contains(m)) {
          return Status::InvalidArgument("spec.template.resources.whole_gpus.models: no '" + m +
                                         "' GPU in pool '" + pool + "'");
        }
      }
      break;
    case RequestShape::kMig:
      if (!lim.mig_profiles.contains(request.mig_profile)) {
        return Status::InvalidArgument("spec.template.resources.mig.profile: no '" +
                                       request.mig_profile + "' MIG instance in pool '" + pool +
                                       "'");
      }
      break;
    case RequestShape::kSku:
      break;
  }
  return Status::Ok();
}

}  // namespace

// Pool, class, access, size and request, checked in that order (the first failure is the answer).
Status Core::State::Admit(const JobSpec& spec, int32_t* priority, ResourceRequest* request) const {
  auto pool_it = pools.find(spec.pool);
  if (pool_it == pools.end())
    return Status::NotFound("spec.pool: pool '" + spec.pool + "' not found");
  const PoolEntry& pool = pool_it->second;
  GPUPOOL_RETURN_IF_ERROR(ResolveClass(options, spec, priority));
  GPUPOOL_RETURN_IF_ERROR(CheckAccess(pool.rec, spec));
  if (spec.task_count < 1 || spec.task_count > options.max_tasks_per_job) {
    return Status::InvalidArgument("spec.task_count: must be between 1 and " +
                                   std::to_string(options.max_tasks_per_job));
  }
  *request = spec.task_template.resources;
  GPUPOOL_RETURN_IF_ERROR(ResolveSku(options, request));
  // An empty pool accepts anything: nodes may join later.
  if (pool.nodes.empty()) return Status::Ok();
  return CheckWithinLimits(pool.limits, spec.pool, *request);
}

placement::Request Core::State::ToPlacement(const ResourceRequest& r) const {
  placement::Request q;
  q.cpu_milli = r.cpu_milli;
  q.memory_mib = r.memory_mib;
  switch (r.shape) {
    case RequestShape::kFractional:
    case RequestShape::kSku:
      q.kind = placement::RequestKind::kFractional;
      q.per_device = r.fractional;
      q.gpu_count = 1;
      break;
    case RequestShape::kWholeGpus:
      q.kind = placement::RequestKind::kWholeGpu;
      q.gpu_count = r.gpu_count;
      q.allowed_models = r.models;
      break;
    case RequestShape::kMig:
      q.kind = placement::RequestKind::kMig;
      q.mig_profile = r.mig_profile;
      q.gpu_count = 1;
      break;
  }
  return q;
}

// ---------------------------------------------------------------------------------------------
// Jobs

// Admit, then refuse a job that can never fit its quota (one that fits the limit waits its
// turn); a refusal is counted by its outcome.
Status Core::State::AdmitSubmission(const JobSpec& spec, int32_t* priority,
                                    ResourceRequest* request) const {
  Status st = Admit(spec, priority, request);
  if (st.ok()) {
    QuotaAmount one = Estimate(*request), need;
    int32_t together = spec.gang ? spec.task_count : 1;
    need.resources.milli_tflops = one.resources.milli_tflops * together;
    need.resources.vram_mib = one.resources.vram_mib * together;
    need.devices = one.devices * together;
    st = book.CheckNeverFits(spec.pool, spec.tenant, need);
  }
  if (!st.ok() && metrics != nullptr) {
    metrics->Submission(st.code() == StatusCode::kNotFound             ? "not_found"
                        : st.code() == StatusCode::kPermissionDenied   ? "denied"
                        : st.code() == StatusCode::kFailedPrecondition ? "quota"
                                                                       : "invalid");
  }
  return st;
}

// The admitted job under the next id, PENDING, its tasks queued-to-be.
JobEntry Core::State::NewJob(JobSpec spec, int32_t priority, const ResourceRequest& request) {
  if (spec.priority_class.empty()) spec.priority_class = options.default_priority_class;
  JobEntry entry;
  entry.priority = priority;
  entry.request = request;
  JobRecord& job = entry.head;
  job.id = ++max_job_id;
  job.spec = std::move(spec);
  job.state = JobState::kPending;
  job.submit_us = clock->NowMicros();
  entry.tasks.resize(static_cast<size_t>(job.spec.task_count));
  for (int32_t i = 0; i < job.spec.task_count; ++i) {
    TaskRecord& t = entry.task(i).rec;
    t.job_id = job.id;
    t.index = i;
    t.reason = "queued";
    t.pending.code = PendingCode::kQueued;
  }
  return entry;
}

// Once the job is durable: into the table and the queue, and only then answered.
void Core::State::AcceptStored(Core* core, JobEntry entry, const Core::Callback<JobRecord>& done) {
  if (metrics != nullptr) metrics->Submission("accepted");
  if (PoolEntry* pool = FindPool(entry.head.spec.pool))
    LearnSubmission(*pool, ToPlacement(entry.request), entry.head.spec.task_count);
  JobEntry& added = jobs.Insert(std::move(entry));
  for (int32_t i = 0; i < added.size(); ++i) queue.Add(added, i, /*fresh=*/true);
  done(added.Record());
  RequestSchedule(core, /*full=*/false);
}

void Core::SubmitJob(JobSpec spec, Callback<JobRecord> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  int32_t priority = 0;
  ResourceRequest request;
  if (Status st = s_->AdmitSubmission(spec, &priority, &request); !st.ok()) {
    done(st);
    return;
  }
  JobEntry entry = s_->NewJob(std::move(spec), priority, request);
  const JobRecord& job = entry.head;
  std::vector<Mutation> batch;
  batch.emplace_back(InsertJob{entry.Record()});
  batch.emplace_back(
      AppendEvent{s_->Event("job.submitted", "job/" + std::to_string(job.id),
                            "submitted by " + job.spec.tenant + " to pool " + job.spec.pool + ", " +
                                std::to_string(job.spec.task_count) + " task(s)",
                            job.spec.tenant)});
  s_->Persist(std::move(batch),
              [this, entry = std::move(entry), done = std::move(done)](Status commit) mutable {
                if (!commit.ok()) {
                  if (s_->metrics != nullptr) s_->metrics->Submission("unavailable");
                  done(commit.WithContext("job not stored"));
                  return;
                }
                s_->AcceptStored(this, std::move(entry), done);
              });
}

Result<JobRecord> Core::GetJob(int64_t id) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  const JobEntry* job = s_->jobs.Find(id);
  if (job == nullptr) {
    std::string msg = "job " + std::to_string(id) + " not found";
    if (id > 0 && id <= s_->max_job_id && s_->options.job_retention_ms > 0) {
      msg += " (finished jobs are kept " + std::to_string(s_->options.job_retention_ms / 1000) +
             " s after they end; its record stays in the database)";
    }
    return Status::NotFound(msg);
  }
  return job->Record();
}

JobPage Core::ListJobs(const JobFilter& f) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  JobPage page;
  int32_t limit = f.limit > 0 ? f.limit : 100;
  // Adds the job unless filtered out; false once the page is full.
  auto add = [&](const JobEntry& job) {
    const JobRecord& j = job.head;
    if (f.state && j.state != *f.state) return true;
    if (f.replicas_only && j.spec.service_id == 0) return true;
    if (f.unfinished_only && IsTerminal(j.state)) return true;
    if (!f.tenant.empty() && !TenantWithin(j.spec.tenant, f.tenant)) return true;
    if (static_cast<int32_t>(page.jobs.size()) == limit) {
      page.next_after_id = page.jobs.back().id;
      return false;
    }
    page.jobs.push_back(job.Record());
    return true;
  };
  if (!f.pool.empty()) {  // the pool's jobs alone, through the pool index
    const std::set<int64_t>& ids = s_->jobs.InPool(f.pool);
    for (auto it = ids.upper_bound(f.after_id); it != ids.end(); ++it) {
      if (!add(s_->jobs.at(*it))) break;
    }
    return page;
  }
  for (auto it = s_->jobs.upper_bound(f.after_id); it != s_->jobs.end(); ++it) {
    if (!add(it->second)) break;
  }
  return page;
}

Result<int64_t> Core::WatchJob(int64_t job_id, WatchFn fn) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  JobEntry* job = s_->jobs.Find(job_id);
  if (job == nullptr) return Status::NotFound("job " + std::to_string(job_id) + " not found");
  fn(JobChange{job->Record(), "current state", s_->clock->NowMicros()});
  if (IsTerminal(job->head.state)) return int64_t{0};
  int64_t id = s_->next_watch_id++;
  s_->watchers.emplace(id, Watcher{job_id, std::move(fn)});
  s_->watchers_by_job.emplace(job_id, id);
  return id;
}

void Core::Unwatch(int64_t watch_id) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  auto it = s_->watchers.find(watch_id);
  if (it == s_->watchers.end()) return;
  auto [lo, hi] = s_->watchers_by_job.equal_range(it->second.job_id);
  for (auto w = lo; w != hi; ++w) {
    if (w->second == watch_id) {
      s_->watchers_by_job.erase(w);
      break;
    }
  }
  s_->watchers.erase(it);
}

Result<std::string> Core::NodeOfTask(const std::string& task_id) const {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  int32_t index = 0;
  JobEntry* job = s_->jobs.FindTask(task_id, &index);
  if (job == nullptr) return Status::NotFound("task " + task_id + " not found");
  const TaskRecord& t = job->task(index).rec;
  if (t.node.empty()) {
    return Status::FailedPrecondition("task " + task_id + " has not been placed yet");
  }
  return t.node;
}

}  // namespace gpupool
