// A deterministic harness for Core scenario tests: a manual clock, an executor that queues
// closures until Drain(), the in-memory store, and simulated agents that record the commands
// the core sends them.
//
// The invariant every scenario is held to: after each Drain(), unless the core says it holds
// changes the store refused (Core::unstored_changes()), the state recovered from the store equals
// the state in memory (ExpectDurable). Display text (`reason`) and heartbeat liveness (a node's
// last heartbeat, device health from heartbeats) are the named exceptions: they are not stored on
// every change.
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "scheduler/core.h"
#include "store/memory_store.h"

namespace gpupool::testing {

inline constexpr int64_t kSecond = 1'000'000;  // in the clock's microseconds

class RecordingAgents : public AgentGateway {
 public:
  bool StartTask(const std::string& node, const StartTaskCommand& cmd) override {
    starts.push_back({node, cmd});
    return connected.contains(node);
  }
  bool StopTask(const std::string& node, const StopTaskCommand& cmd) override {
    stops.push_back({node, cmd});
    return connected.contains(node);
  }
  bool PinImages(const std::string& node, const PinImagesCommand& cmd) override {
    pins.push_back({node, cmd});
    return connected.contains(node);
  }
  std::vector<std::pair<std::string, StartTaskCommand>> starts;
  std::vector<std::pair<std::string, StopTaskCommand>> stops;
  bool SetMigLayout(const std::string& node, const MigLayoutCommand& cmd) override {
    mig.push_back({node, cmd});
    return connected.contains(node);
  }
  std::vector<std::pair<std::string, PinImagesCommand>> pins;
  std::vector<std::pair<std::string, MigLayoutCommand>> mig;
  std::set<std::string> connected;
};

// The in-memory store with a fault hook: a batch for which `refuse` returns true fails with
// UNAVAILABLE and nothing of it is applied (the store's all-or-nothing contract).
class RefusingStore : public Store {
 public:
  explicit RefusingStore(MemoryStore* inner) : inner_(inner) {}
  Result<int64_t> AcquireLeadership() override { return inner_->AcquireLeadership(); }
  Result<RecoveredState> Recover() override { return inner_->Recover(); }
  void Apply(std::vector<Mutation> batch, Done done) override {
    if (refuse && refuse(batch)) {
      ++refused;
      done(Status::Unavailable("database unavailable (refused by the test)"));
      return;
    }
    inner_->Apply(std::move(batch), std::move(done));
  }
  Result<std::vector<EventRecord>> ListEvents(const std::string& prefix, int limit) override {
    return inner_->ListEvents(prefix, limit);
  }
  std::function<bool(const std::vector<Mutation>&)> refuse;
  int refused = 0;

 private:
  MemoryStore* inner_;
};

// True when the batch stores a task with the given stop intent.
inline bool StoresStop(const std::vector<Mutation>& batch, StopIntent stop) {
  for (const Mutation& m : batch) {
    if (const auto* ut = std::get_if<UpdateTask>(&m); ut != nullptr && ut->task.stop == stop)
      return true;
  }
  return false;
}

// A record with what is not stored on every change blanked (see the header comment).
inline JobRecord Durable(JobRecord j) {
  for (TaskRecord& t : j.tasks) {
    t.reason.clear();
    t.pending = {};
    t.pull = {};
  }
  return j;
}
inline NodeRecord Durable(NodeRecord n) {
  n.last_heartbeat_us = 0;
  for (DeviceRecord& d : n.devices) d.healthy = true;
  return n;
}

// The registration of a simulated agent with `gpus` devices of 989 TFLOPS / 81920 MiB (an H100).
inline AgentRegistration SimulatedH100s(const std::string& node, const std::string& pool,
                                        int gpus) {
  AgentRegistration reg;
  reg.node.name = node;
  reg.node.pool = pool;
  reg.node.cpu_milli = 64'000;
  reg.node.memory_mib = 512 * 1024;
  for (int i = 0; i < gpus; ++i) {
    DeviceRecord d;
    d.id = "GPU-" + node + "-" + std::to_string(i);
    d.model = "H100-SXM";
    d.index = i;
    d.physical = Resources{989'000, 81'920};
    reg.node.devices.push_back(d);
  }
  return reg;
}

// `spec` in priority class `cls` (the scenario tests' shorthand: Of("high", Whole("gpu", 1))).
inline JobSpec Of(const std::string& cls, JobSpec spec) {
  spec.priority_class = cls;
  return spec;
}

class CoreHarness {
 public:
  explicit CoreHarness(SchedulerOptions options = SchedulerOptions::Defaults(),
                       std::shared_ptr<MemoryDatabase> db = nullptr,
                       SchedulerMetrics* metrics = nullptr, int64_t clock_start_us = 0)
      : store(db ? std::make_unique<MemoryStore>(db) : std::make_unique<MemoryStore>()),
        faults(store.get()) {
    if (clock_start_us != 0) clock.Set(clock_start_us);  // before recovery reads the time
    core = std::make_unique<Core>(
        options, &clock, &faults, &agents,
        [this](std::function<void()> fn) { queue.push_back(std::move(fn)); }, metrics);
    Result<int64_t> epoch = store->AcquireLeadership();
    Result<RecoveredState> state = store->Recover();
    if (!epoch.ok() || !state.ok() || !core->Recover(*state, *epoch).ok()) std::abort();
    Drain();
  }

  // Runs queued closures (store completions, scheduling passes) until none is left, then checks
  // the durability invariant.
  void Drain() {
    while (!queue.empty()) {
      auto fn = std::move(queue.front());
      queue.pop_front();
      fn();
    }
    if (core == nullptr) return;
    Status indexes = core->CheckInvariants();  // the job table's node and pool indexes
    EXPECT_TRUE(indexes.ok()) << indexes.ToString();
    if (check_durable) ExpectDurable();
  }

  // What memory holds = what the store holds, once nothing is waiting to be stored again.
  void ExpectDurable() {
    if (core->unstored_changes() != 0) return;
    Result<RecoveredState> state = store->Recover();
    if (!state.ok()) return;  // the test plays an outage
    std::map<int64_t, JobRecord> stored;
    for (JobRecord& j : state->jobs) stored.emplace(j.id, std::move(j));
    JobFilter all;
    all.limit = 1'000'000;
    for (const JobRecord& j : core->ListJobs(all).jobs) {
      auto it = stored.find(j.id);
      ASSERT_NE(it, stored.end()) << "job " << j.id << " is in memory but not stored";
      EXPECT_EQ(Durable(j), Durable(it->second)) << "job " << j.id << ": memory != store";
    }
    std::map<std::string, NodeRecord> nodes;
    for (NodeRecord& n : state->nodes) nodes.emplace(n.name, std::move(n));
    for (const NodeView& v : core->ListNodes("")) {
      auto it = nodes.find(v.node.name);
      ASSERT_NE(it, nodes.end()) << "node " << v.node.name << " is in memory but not stored";
      EXPECT_EQ(Durable(v.node), Durable(it->second)) << "node " << v.node.name;
    }
  }

  template <typename T>
  Result<T> Sync(std::function<void(Core::Callback<T>)> call) {
    std::optional<Result<T>> out;
    call([&](Result<T> r) { out.emplace(std::move(r)); });
    Drain();
    if (!out) return Status::Internal("callback not called");
    return *out;
  }

  Result<PoolView> CreatePool(const std::string& name, SharingMode mode = SharingMode::kFractional,
                              const std::string& strategy = "first-fit") {
    PoolRecord p;
    p.name = name;
    p.sharing_mode = mode;
    p.placement_strategy = strategy;
    return Sync<PoolView>([&](auto cb) { core->CreatePool(p, cb); });
  }

  // Registers a simulated agent with `gpus` devices of 989 TFLOPS / 81920 MiB (an H100).
  Result<RegistrationResult> Register(const std::string& node, const std::string& pool, int gpus,
                                      std::vector<AgentRegistration::Running> running = {}) {
    AgentRegistration reg = SimulatedH100s(node, pool, gpus);
    reg.running = std::move(running);
    agents.connected.insert(node);
    return Sync<RegistrationResult>([&](auto cb) { core->OnAgentRegister(reg, cb); });
  }

  // After a restart: the node's agent registers again, still running what the core believes
  // runs there (SCHEDULED or RUNNING on it).
  Result<RegistrationResult> Reconnect(const std::string& node, const std::string& pool, int gpus) {
    std::vector<AgentRegistration::Running> running;
    for (const JobRecord& j : core->ListJobs(JobFilter{}).jobs) {
      for (const TaskRecord& t : j.tasks) {
        if (t.node == node && (t.state == TaskState::kScheduled || t.state == TaskState::kRunning))
          running.push_back({TaskId(t.job_id, t.index), t.attempt});
      }
    }
    return Register(node, pool, gpus, std::move(running));
  }

  static JobSpec Fractional(const std::string& pool, int64_t milli_tflops, int64_t vram_mib,
                            int tasks = 1, const std::string& cls = "") {
    JobSpec s;
    s.tenant = "acme/research/alice";
    s.pool = pool;
    s.priority_class = cls;
    s.task_count = tasks;
    s.task_template.command = {"/bin/true"};
    s.task_template.resources.shape = RequestShape::kFractional;
    s.task_template.resources.fractional = Resources{milli_tflops, vram_mib};
    return s;
  }

  static JobSpec Whole(const std::string& pool, int gpus, int tasks = 1) {
    JobSpec s = Fractional(pool, 0, 0, tasks);
    s.task_template.resources.shape = RequestShape::kWholeGpus;
    s.task_template.resources.gpu_count = gpus;
    return s;
  }

  Result<JobRecord> Submit(JobSpec spec) {
    return Sync<JobRecord>([&](auto cb) { core->SubmitJob(spec, cb); });
  }

  TaskRecord Task(int64_t job, int index = 0) {
    return core->GetJob(job)->tasks[static_cast<size_t>(index)];
  }

  void Report(const std::string& node, int64_t job, int index, TaskState state, int exit_code = 0) {
    TaskReport r;
    r.node = node;
    r.task_id = TaskId(job, index);
    r.attempt = Task(job, index).attempt;
    r.state = state;
    r.exit_code = exit_code;
    core->OnTaskReport(r);
    Drain();
  }

  // Tenants and quotas.
  Status CreateTenant(const std::string& path) {
    TenantRecord t;
    t.path = path;
    return Sync<TenantView>([&](auto cb) { core->CreateTenant(t, cb); }).status();
  }
  Status SetQuota(const std::string& tenant, const std::string& pool, QuotaAmount guaranteed,
                  QuotaAmount limit) {
    QuotaRecord q{tenant, pool, guaranteed, limit};
    return Sync<QuotaView>([&](auto cb) { core->SetQuota(q, cb); }).status();
  }
  static QuotaAmount Tflops(int64_t tflops) { return QuotaAmount{Resources{tflops * 1000, 0}, 0}; }
  static QuotaAmount Devices(int32_t n) { return QuotaAmount{Resources{}, n}; }

  static JobSpec As(const std::string& tenant, JobSpec spec) {
    spec.tenant = tenant;
    return spec;
  }

  // Reports RUNNING for every started task that is still SCHEDULED.
  void RunStarted() {
    for (const auto& [node, cmd] : agents.starts) {
      int64_t job = 0;
      int32_t index = 0;
      if (!ParseTaskId(cmd.task_id, &job, &index)) continue;
      TaskRecord t = Task(job, index);
      if (t.state == TaskState::kScheduled && t.attempt == cmd.attempt && t.node == node)
        Report(node, job, index, TaskState::kRunning);
    }
  }

  // Answers every stop sent so far with the process's exit (143, SIGTERM), once.
  void ExitStopped() {
    for (; stops_answered < agents.stops.size(); ++stops_answered) {
      const auto& [node, cmd] = agents.stops[stops_answered];
      TaskReport r;
      r.node = node;
      r.task_id = cmd.task_id;
      r.attempt = cmd.attempt;
      r.state = TaskState::kFailed;
      r.exit_code = 143;
      core->OnTaskReport(r);
      Drain();
    }
  }

  size_t stops_answered = 0;
  bool check_durable = true;
  ManualClock clock;
  std::unique_ptr<MemoryStore> store;
  RefusingStore faults;  // what the core writes through
  RecordingAgents agents;
  std::deque<std::function<void()>> queue;
  std::unique_ptr<Core> core;
};

}  // namespace gpupool::testing
