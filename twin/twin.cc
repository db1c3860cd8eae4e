// Twin (twin.h): set-up of the core, the event loop, and the simulated agents' answers.
#include "twin/twin.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <queue>

#include "base/clock.h"
#include "placement/strategy.h"
#include "pool/mig_layout.h"
#include "scheduler/core.h"
#include "store/memory_store.h"
#include "twin/recorder.h"
#include "twin/sim_agents.h"

namespace gpupool::twin {
namespace {

constexpr int64_t kClockBase = 1'700'000'000'000'000;  // simulated t = 0 on the core's clock

enum class Kind { kRunning, kFinish, kExit, kMigApplied };

struct Event {
  int64_t time = 0;
  uint64_t seq = 0;
  Kind kind = Kind::kFinish;
  size_t task = 0;  // kMigApplied: the index of the layout in Loop::relayouts_
  int32_t attempt = 0;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

// A MIG GPU as its simulated agent sees it.
struct MigGpu {
  MigLayout layout;
  bool dynamic = true;
  int64_t generation = 0;  // of the last layout applied; new instances get new ids
};

// A layout the core asked for, in flight until its kMigApplied event.
struct Relayout {
  size_t node = 0;
  int gpu = 0;
  MigLayoutCommand cmd;
};

// A task as the simulated agents see it.
struct Run {
  int64_t job_id = 0;
  int32_t index = 0;  // the task's index in its job (a gang's member)
  int32_t attempt = -1;
  std::string node;
  bool holding = false;
  int64_t run_start = 0;
  int64_t remaining_us = 0;
};

class Loop {
 public:
  Loop(const Workload& w, const OrgTree& org, const TwinConfig& c)
      : w_(w), org_(org), c_(c), clock_(kClockBase), runs_(w.tasks.size()) {
    for (size_t i = 0; i < w.tasks.size(); ++i) runs_[i].remaining_us = w.tasks[i].duration_us;
  }

  Status Setup(SchedulerOptions options) {
    catalog_ = options.catalog != nullptr ? options.catalog : &Catalog::Builtin();
    core_ = std::make_unique<Core>(
        std::move(options), &clock_, &store_, &agents_,
        [this](std::function<void()> fn) { queue_.push_back(std::move(fn)); });
    GPUPOOL_ASSIGN_OR_RETURN(int64_t epoch, store_.AcquireLeadership());
    GPUPOOL_ASSIGN_OR_RETURN(RecoveredState state, store_.Recover());
    GPUPOOL_RETURN_IF_ERROR(core_->Recover(state, epoch));
    PoolRecord pool;
    pool.name = c_.pool;
    pool.placement_strategy = c_.strategy;
    pool.sharing_mode = SharingMode::kFractional;
    pool.compute_overcommit = Ratio{c_.compute_overcommit_permille};
    pool.mig_relayout = c_.mig_relayout;
    GPUPOOL_RETURN_IF_ERROR(Sync<PoolView>([&](auto cb) { core_->CreatePool(pool, cb); }));
    const int64_t pool_tflops = w_.GpuCount() * w_.gpu.milli_tflops;
    for (const OrgTenant& t : org_.tenants) {
      TenantRecord rec;
      rec.path = t.path;
      GPUPOOL_RETURN_IF_ERROR(Sync<TenantView>([&](auto cb) { core_->CreateTenant(rec, cb); }));
      if (!t.HasQuota()) continue;
      QuotaRecord q;
      q.tenant = t.path;
      q.pool = c_.pool;
      q.guaranteed.resources.milli_tflops = pool_tflops * t.guaranteed_pct_milli / 100'000;
      q.limit.resources.milli_tflops = pool_tflops * t.limit_pct_milli / 100'000;
      GPUPOOL_RETURN_IF_ERROR(Sync<QuotaView>([&](auto cb) { core_->SetQuota(q, cb); }));
    }
    mig_.resize(w_.nodes.size());
    for (size_t i = 0; i < w_.nodes.size(); ++i) {
      const TwinNode& n = w_.nodes[i];
      for (const auto& [gpu, spec] : n.mig) {
        GPUPOOL_RETURN_IF_ERROR(CheckMigGpu(n, gpu, spec));
        mig_[i][gpu].layout = spec.layout;
        mig_[i][gpu].dynamic = spec.dynamic;
      }
      GPUPOOL_RETURN_IF_ERROR(
          Sync<RegistrationResult>([&](auto cb) { core_->OnAgentRegister(Registration(i), cb); }));
    }
    agents_.outbox.clear();
    return Status::Ok();
  }

  TwinReport Run(Recorder& rec, int64_t horizon) {
    auto wall_start = std::chrono::steady_clock::now();
    size_t next_arrival = 0;
    int64_t next_sample = 0, next_tick = -1;
    const int64_t tick_us = std::max<int64_t>(1, c_.tick_ms) * 1000;
    const int64_t sample_us = std::max<int64_t>(1, c_.sample_ms) * 1000;
    int64_t events = 0, next_progress = 0;
    const std::clock_t cpu_start = std::clock();
    while (true) {
      // The earliest of: an agent's answer, an arrival, the tick, the sample (ties in that order).
      constexpr int64_t kNever = INT64_MAX;
      int64_t t_event = heap_.empty() ? kNever : heap_.top().time;
      int64_t t_arrival =
          next_arrival < w_.tasks.size() ? w_.tasks[next_arrival].arrival_us : kNever;
      int64_t t_tick = next_tick < 0 ? kNever : next_tick;
      int64_t now = std::min({t_event, t_arrival, t_tick, next_sample});
      if (now > horizon) break;
      if (c_.should_stop && (events & 1023) == 0 && c_.should_stop()) break;
      clock_.Set(kClockBase + now);
      if (c_.progress && now >= next_progress) {
        std::fprintf(
            stderr, "twin: %.1f h of %.1f h simulated, %zu/%zu arrived, %zu pending, %.0f s\n",
            static_cast<double>(now) / 3.6e9, static_cast<double>(horizon) / 3.6e9, next_arrival,
            w_.tasks.size(), core_->pending_tasks(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
        next_progress = now + 3'600'000'000;
      }
      ++events;
      if (now == t_event) {
        Event e = heap_.top();
        heap_.pop();
        Handle(rec, e, now);
      } else if (now == t_arrival) {
        Arrive(rec, next_arrival++, now);
      } else if (now == t_tick) {
        next_tick = -1;
        core_->Tick();
        Drain();
      } else {
        rec.Sample(now, static_cast<int64_t>(core_->pending_tasks()));
        next_sample = now + sample_us;
      }
      Deliver(rec, now);
      if (next_tick < 0 && core_->pending_tasks() > 0) next_tick = now + tick_us;
    }
    clock_.Set(kClockBase + horizon);
    rec.Sample(horizon, static_cast<int64_t>(core_->pending_tasks()));
    TwinReport r = rec.Finish(horizon, c_.series_points);
    r.events = events;
    r.mig_relayouts = mig_relayouts_;
    r.starts = std::move(starts_);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    r.cpu_s = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    r.speedup = r.cpu_s > 0 ? r.horizon_s / r.cpu_s : 0;
    return r;
  }

 private:
  template <typename T>
  Status Sync(const std::function<void(Core::Callback<T>)>& call) {
    std::optional<Result<T>> out;
    call([&](Result<T> r) { out.emplace(std::move(r)); });
    Drain();
    if (!out) return Status::Internal("twin: the core did not answer a set-up call");
    return out->status();
  }

  void Drain() {
    while (!queue_.empty()) {
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      fn();
    }
  }

  void Push(int64_t time, Kind kind, size_t task, int32_t attempt) {
    heap_.push(Event{time, seq_++, kind, task, attempt});
  }

  // A gang arrives whole with its first member (they share the arrival time); the others'
  // arrivals are then no-ops.
  void Arrive(Recorder& rec, size_t i, int64_t now) {
    const TwinTask& t = w_.tasks[i];
    std::vector<size_t> members = {i};
    if (t.gang_index >= 0) {
      members = w_.gangs[static_cast<size_t>(t.gang_index)];
      if (members.front() != i) return;
    }
    JobSpec spec;
    spec.tenant = t.tenant;
    spec.pool = c_.pool;
    spec.priority_class = t.priority_class;
    spec.task_count = static_cast<int32_t>(members.size());
    spec.gang = t.gang_index >= 0;
    spec.task_template.command = {"/bin/true"};
    spec.task_template.resources = t.Request(w_.gpu);
    spec.labels["trace.pod"] = t.gang_index >= 0 ? t.gang : t.name;
    for (size_t m : members) rec.Arrive(m, now);
    std::optional<Result<JobRecord>> out;
    core_->SubmitJob(std::move(spec), [&](Result<JobRecord> r) { out.emplace(std::move(r)); });
    // The job id is needed before the pass that the submission asked for starts it.
    while (!out && !queue_.empty()) {
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      fn();
    }
    if (!out || !out->ok()) {
      for (size_t m : members) rec.Rejected(m);
      Drain();
      return;
    }
    for (size_t k = 0; k < members.size(); ++k) {
      runs_[members[k]].job_id = (*out)->id;
      runs_[members[k]].index = static_cast<int32_t>(k);
    }
    job_tasks_[(*out)->id] = std::move(members);
    Drain();
  }

  void Handle(Recorder& rec, const Event& e, int64_t now) {
    if (e.kind == Kind::kMigApplied) {
      ApplyRelayout(e.task);
      return;
    }
    struct Run& run = runs_[e.task];
    if (!run.holding || run.attempt != e.attempt) return;  // stale: that attempt is over
    TaskReport report;
    report.node = run.node;
    report.task_id = TaskId(run.job_id, run.index);
    report.attempt = e.attempt;
    if (e.kind == Kind::kRunning) {
      report.state = TaskState::kRunning;
      core_->OnTaskReport(report);
      Drain();
      return;
    }
    const TwinTask& t = w_.tasks[e.task];
    bool preempted = false;
    if (e.kind == Kind::kExit) {
      Result<JobRecord> job = core_->GetJob(run.job_id);
      const auto index = static_cast<size_t>(run.index);
      preempted =
          job.ok() && index < job->tasks.size() && job->tasks[index].stop == StopIntent::kPreempt;
      report.state = TaskState::kFailed;
      report.exit_code = 143;
      report.signal = 15;
    } else {
      report.state = TaskState::kSucceeded;
    }
    run.holding = false;
    core_->OnTaskReport(report);
    Drain();
    double lost = 0;
    if (preempted) {
      int64_t ran = std::max<int64_t>(0, now - run.run_start);
      if (c_.resume_remaining) {
        run.remaining_us = std::max<int64_t>(1, run.remaining_us - ran);
      } else {
        lost = static_cast<double>(ran) / 1e6 * static_cast<double>(t.GpuMilli()) / 1000.0;
        run.remaining_us = t.duration_us;
      }
    }
    rec.End(e.task, now, preempted, lost);
  }

  // Turns what the core told the agents into their answers.
  void Deliver(Recorder& rec, int64_t now) {
    std::vector<std::pair<std::string, MigLayoutCommand>> layouts;
    layouts.swap(agents_.mig_outbox);
    for (auto& [node, cmd] : layouts) QueueRelayout(node, std::move(cmd), now);
    std::vector<SimAgents::Command> out;
    out.swap(agents_.outbox);
    for (SimAgents::Command& c : out) {
      int64_t job_id = 0;
      int32_t index = 0;
      if (!ParseTaskId(c.start ? c.start_cmd.task_id : c.stop_cmd.task_id, &job_id, &index))
        continue;
      auto it = job_tasks_.find(job_id);
      if (it == job_tasks_.end() || index < 0 || static_cast<size_t>(index) >= it->second.size())
        continue;
      size_t i = it->second[static_cast<size_t>(index)];
      struct Run& run = runs_[i];
      if (c.start) {
        if (run.holding && run.attempt == c.start_cmd.attempt) continue;  // a re-send
        run.attempt = c.start_cmd.attempt;
        run.node = c.node;
        run.holding = true;
        run.run_start = now + c_.start_latency_ms * 1000;
        std::vector<Recorder::Grant> grants;
        for (const DeviceGrantCommand& d : c.start_cmd.devices)
          grants.push_back({d.uuid, d.milli_tflops});
        rec.Start(i, now, grants);
        if (c_.record_starts) {
          StartLog log{static_cast<double>(now) / 1e6, w_.tasks[i].name, run.attempt, c.node, {}};
          for (const Recorder::Grant& g : grants) log.devices.push_back(g.device);
          starts_.push_back(std::move(log));
        }
        Push(run.run_start, Kind::kRunning, i, run.attempt);
        Push(run.run_start + run.remaining_us, Kind::kFinish, i, run.attempt);
      } else {
        if (!run.holding || run.attempt != c.stop_cmd.attempt) continue;
        Push(now + c_.stop_latency_ms * 1000, Kind::kExit, i, run.attempt);
      }
    }
  }

  // A MIG GPU of the workload: one of the node's GPUs, and one the twin can model.
  Status CheckMigGpu(const TwinNode& n, int gpu, const TwinMigGpu& spec) const {
    const std::string where = "node " + n.name + ": GPU " + std::to_string(gpu);
    if (gpu < 0 || gpu >= n.gpus) return Status::InvalidArgument(where + ": no such GPU");
    return CheckTwinMigGpu(*catalog_, n.model, spec).WithContext(where);
  }

  std::string GpuId(size_t node, int g) const {
    const TwinNode& n = w_.nodes[node];
    const auto k = static_cast<size_t>(g);
    return k < n.device_ids.size() ? n.device_ids[k] : n.name + "-gpu" + std::to_string(g);
  }

  // The node's registration as its agent would send it: its GPUs, each MIG GPU's instances
  // (ids as a driver gives them: new ones per layout), and the tasks it holds.
  AgentRegistration Registration(size_t i) const {
    const TwinNode& n = w_.nodes[i];
    AgentRegistration reg;
    reg.node.name = n.name;
    reg.node.pool = c_.pool;
    reg.node.cpu_milli = n.cpu_milli;
    reg.node.memory_mib = n.memory_mib;
    const GpuModel* model = catalog_->Find(n.model);
    for (int g = 0; g < n.gpus; ++g) {
      DeviceRecord d;
      d.id = GpuId(i, g);
      d.model = n.model;
      d.index = g;
      d.physical = w_.gpu;
      auto mig = mig_[i].find(g);
      d.mig_enabled = mig != mig_[i].end() && mig->second.dynamic;
      reg.node.devices.push_back(d);
      if (mig == mig_[i].end()) continue;
      int j = 0;
      for (const MigPlacement& p : mig->second.layout) {
        const MigProfile* profile = model->FindMig(p.profile);  // CheckMigGpu
        DeviceRecord m = d;
        m.mig_enabled = false;
        m.id = d.id + "-mig" + std::to_string(j++);
        if (mig->second.generation > 0) m.id += "-g" + std::to_string(mig->second.generation);
        m.mig_profile = p.profile;
        m.mig_start = p.start;
        m.parent_id = d.id;
        m.physical = Resources{profile->milli_tflops, profile->vram_mib};
        reg.node.devices.push_back(std::move(m));
      }
    }
    for (const struct Run& run : runs_) {
      if (run.holding && run.node == n.name)
        reg.running.push_back({TaskId(run.job_id, run.index), run.attempt});
    }
    return reg;
  }

  void QueueRelayout(const std::string& node, MigLayoutCommand cmd, int64_t now) {
    for (size_t i = 0; i < w_.nodes.size(); ++i) {
      if (w_.nodes[i].name != node) continue;
      for (const auto& [g, _] : mig_[i]) {
        if (GpuId(i, g) != cmd.gpu) continue;
        relayouts_.push_back(Relayout{i, g, std::move(cmd)});
        Push(now + c_.relayout_ms * 1000, Kind::kMigApplied, relayouts_.size() - 1, 0);
        return;
      }
    }
  }

  // The agent's side of a layout: the instances are rebuilt (always successfully here: the core
  // validated the layout against the catalog) and the node registers again with the outcome.
  void ApplyRelayout(size_t k) {
    const Relayout& r = relayouts_[k];
    MigGpu& gpu = mig_[r.node][r.gpu];
    AgentRegistration::MigOutcome outcome{r.cmd.gpu, r.cmd.generation, "", false};
    Result<MigLayout> layout =
        ParseMigLayout(*catalog_->Find(w_.nodes[r.node].model), r.cmd.layout);
    if (layout.ok()) {
      gpu.layout = *std::move(layout);
      gpu.generation = r.cmd.generation;
      ++mig_relayouts_;
    } else {
      outcome.error = layout.status().message();
    }
    AgentRegistration reg = Registration(r.node);
    reg.mig_outcomes.push_back(std::move(outcome));
    core_->OnAgentRegister(std::move(reg), [](const Result<RegistrationResult>&) {});
    Drain();
  }

  const Workload& w_;
  const OrgTree& org_;
  const TwinConfig& c_;
  ManualClock clock_;
  MemoryStore store_;
  SimAgents agents_;
  std::deque<std::function<void()>> queue_;
  std::unique_ptr<Core> core_;
  std::vector<struct Run> runs_;
  std::unordered_map<int64_t, std::vector<size_t>> job_tasks_;  // job id → tasks by index
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  uint64_t seq_ = 0;
  std::vector<StartLog> starts_;
  const Catalog* catalog_ = nullptr;
  std::vector<std::map<int, MigGpu>> mig_;  // per node: its MIG GPUs by index
  std::vector<Relayout> relayouts_;
  int64_t mig_relayouts_ = 0;
};

}  // namespace

Result<TwinReport> RunTwin(const Workload& workload, const OrgTree& org, const TwinConfig& config) {
  if (!config.strategy.empty() && !placement::ParseStrategy(config.strategy).ok())
    return Status::InvalidArgument("strategy: unknown placement strategy '" + config.strategy +
                                   "'");
  if (workload.nodes.empty()) return Status::InvalidArgument("workload: no node with GPUs");
  SchedulerOptions options = config.scheduler;
  options.throttle_periodic_passes = false;
  // Nodes never fail in a replay: no heartbeat is ever missed.
  options.heartbeat_timeout_ms = 1000LL * 3600 * 24 * 365 * 100;
  options.tenancy.reservation_timeout_ms = 10 * 60 * 1000;
  options.tenancy.queue_order = config.queue_order;
  options.job_retention_ms = 10 * 60 * 1000;  // finished jobs leave the core's memory
  std::set<std::string> used;
  for (const TwinTask& t : workload.tasks) used.insert(t.priority_class);
  for (const std::string& cls : used) {
    if (!options.priority_classes.contains(cls))
      return Status::InvalidArgument("qos_classes: priority class '" + cls + "' is not defined");
  }
  std::map<std::string, int64_t> min_runtime;
  for (auto& [name, cls] : options.priority_classes) {
    if (!config.preemption) {
      cls.preemptible = false;
      cls.may_preempt = false;
    }
    min_runtime[name] = cls.min_runtime_ms * 1000;
  }
  int64_t horizon = config.horizon_us;
  if (horizon <= 0) horizon = workload.tasks.empty() ? 0 : workload.tasks.back().arrival_us;
  Loop loop(workload, org, config);
  Status st = loop.Setup(options);
  if (!st.ok()) return st.WithContext("twin set-up");
  Recorder rec(workload, org, workload.gpu.milli_tflops * config.compute_overcommit_permille / 1000,
               std::move(min_runtime), config.warmup_us, config.guarantee_grace_us);
  TwinReport r = loop.Run(rec, horizon);
  r.label = config.label;
  r.workload = workload.name;
  r.strategy = config.strategy;
  r.queue_order = std::string(QueueOrderName(config.queue_order));
  r.preemption = config.preemption;
  r.resume_remaining = config.resume_remaining;
  r.mig_relayout = std::string(ToString(config.mig_relayout));
  return r;
}

}  // namespace gpupool::twin
