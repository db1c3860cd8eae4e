// Conservation of usage (issue 13's "must show"), on real PostgreSQL with the injected clock:
// a scripted workload — fractional slices on a compute- and memory-overcommitted pool, whole GPUs,
// a MIG instance, a preemption, a node that goes silent and is lost, and a crash of the core right
// after a ledger batch was committed but before the core heard of it, then a restart on the same
// database in which one agent no longer runs its task.
//
// The reference is computed independently of the ledger: at every step the test integrates what
// the core's tasks hold (SCHEDULED or RUNNING, from the task records), rate × the step's whole
// seconds, with the rates derived here from the allocations, the devices and the pools' ratios.
// Every event happens at T0 + whole seconds, so "to the second" is exact: the ledger's totals
// must EQUAL the reference in every dimension, per pool, and no key is stored twice.
//
// Each scenario is asserted, not only run: the preemption happened (the test sees the stop with
// intent PREEMPT) and the report's preempted rows equal those attempts' own integral; the silent
// node's attempts were requeued; CPU time, peak memory and measured spill reported by the node at
// an attempt's end reach the ledger (summed, the maximum, summed) exactly once — spill is what the
// node measured, never derived from what a slice holds; spill, MIG-instance and whole-device
// seconds are non-zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "base/clock.h"
#include "scheduler/core.h"
#include "store/pg_store.h"
#include "tests/scheduler/core_harness.h"
#include "tests/support/completion_loop.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {

constexpr int64_t kS = 1'000'000;
// 2026-11-23 00:00:00.25 UTC: events fall a quarter second after whole seconds.
constexpr int64_t kT0 = 1'795'392'000 * kS + 250'000;

// One "daemon": a Core on a PgStore, its completions run on the test's thread.
class Daemon {
 public:
  Daemon(const std::string& uri, ManualClock* clock, RecordingAgents* agents) {
    PgStoreOptions opts;
    opts.uri = uri;
    auto pg = PgStore::Open(opts);
    if (!pg.ok()) std::abort();
    store = std::make_unique<CountingStore>(std::move(pg).value());
    SchedulerOptions options = SchedulerOptions::Defaults();
    options.metering.interval_s = 60;
    core = std::make_unique<Core>(options, clock, store.get(), agents, loop_.executor());
  }
  // A crash: the store finishes what it was given (committed), nothing of it reaches the core.
  ~Daemon() {
    store.reset();
    loop_.Drop();
  }

  Status Start() {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t epoch, store->AcquireLeadership());
    GPUPOOL_ASSIGN_OR_RETURN(RecoveredState state, store->Recover());
    GPUPOOL_RETURN_IF_ERROR(core->Recover(state, epoch));
    Idle();
    return Status::Ok();
  }

  // Runs completions until no batch is in flight and nothing is queued.
  void Idle() { loop_.Idle(*store); }

  template <typename T>
  Result<T> Sync(std::function<void(Core::Callback<T>)> call) {
    std::optional<Result<T>> out;
    call([&](Result<T> r) { out.emplace(std::move(r)); });
    Idle();
    if (!out) return Status::Internal("no answer");
    return *out;
  }

  std::unique_ptr<CountingStore> store;
  std::unique_ptr<Core> core;

 private:
  CompletionLoop loop_;  // ~Daemon resets the store first: its last completions land here
};

AgentRegistration Node(const std::string& name, const std::string& pool, int gpus) {
  AgentRegistration reg = SimulatedH100s(name, pool, gpus);
  reg.node.spill_budget_mib = 64 * 1024;
  return reg;
}

// An A100 split into two 3g.40gb MIG instances.
AgentRegistration MigNode(const std::string& name, const std::string& pool) {
  AgentRegistration reg;
  reg.node.name = name;
  reg.node.pool = pool;
  reg.node.cpu_milli = 64'000;
  reg.node.memory_mib = 512 * 1024;
  for (int i = 0; i < 2; ++i) {
    DeviceRecord d;
    d.id = "MIG-" + name + "-" + std::to_string(i);
    d.model = "A100-SXM4-80GB";
    d.index = i;
    d.physical = Resources{156'000, 40'960};
    d.mig_profile = "3g.40gb";
    d.parent_id = "GPU-" + name;
    reg.node.devices.push_back(d);
  }
  return reg;
}

using AttemptKey = std::tuple<int64_t, int32_t, int32_t>;  // job, task, attempt

class Conservation : public ::testing::Test {
 protected:
  void SetUp() override {
    auto uri = CreateTestDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
    clock_.Set(kT0);
    d_ = std::make_unique<Daemon>(uri_, &clock_, &agents_);
    ASSERT_OK(d_->Start());
  }

  Status CreatePool(const std::string& name, int64_t compute_permille, int64_t memory_permille) {
    PoolRecord p;
    p.name = name;
    p.placement_strategy = "first-fit";
    p.compute_overcommit = Ratio{compute_permille};
    p.memory_overcommit = Ratio{memory_permille};
    pools_[name] = p;
    return d_->Sync<PoolView>([&](auto cb) { d_->core->CreatePool(p, cb); }).status();
  }

  Status Register(const AgentRegistration& reg, bool with_running = false) {
    AgentRegistration r = reg;
    if (with_running) {
      for (const JobRecord& j : Jobs()) {
        for (const TaskRecord& t : j.tasks) {
          if (t.node == reg.node.name &&
              (t.state == TaskState::kScheduled || t.state == TaskState::kRunning))
            r.running.push_back({TaskId(t.job_id, t.index), t.attempt});
        }
      }
    }
    for (const DeviceRecord& dev : reg.node.devices) devices_[dev.id] = dev;
    nodes_[reg.node.name] = reg;
    agents_.connected.insert(reg.node.name);
    return d_->Sync<RegistrationResult>([&](auto cb) { d_->core->OnAgentRegister(r, cb); })
        .status();
  }

  Result<int64_t> Submit(JobSpec spec) {
    GPUPOOL_ASSIGN_OR_RETURN(JobRecord j,
                             d_->Sync<JobRecord>([&](auto cb) { d_->core->SubmitJob(spec, cb); }));
    return j.id;
  }

  std::vector<JobRecord> Jobs() {
    JobFilter all;
    all.limit = 1'000'000;
    return d_->core->ListJobs(all).jobs;
  }

  // The sandbox's account an agent sends with an attempt's end: distinct per attempt, so a
  // figure carried to the wrong row or counted twice shows.
  static TaskUsageRecord SandboxUsage(const TaskRecord& t) {
    return {1'000'000 + t.job_id * 1000 + t.index * 10 + t.attempt, (t.job_id + 1) << 20, 0,
            4096 * (t.job_id * 100 + t.index * 10 + t.attempt)};
  }

  void Report(const TaskRecord& t, TaskState state, int exit_code = 0) {
    TaskReport r;
    r.node = t.node;
    r.task_id = TaskId(t.job_id, t.index);
    r.attempt = t.attempt;
    r.state = state;
    r.exit_code = exit_code;
    if (state != TaskState::kRunning) {
      r.usage = SandboxUsage(t);
      // Known from the sandbox: the attempt's last ledger row carries it.
      if (t.state == TaskState::kScheduled || t.state == TaskState::kRunning) {
        UsageTotals& e = expected_[PoolOf(t.job_id)];
        e.cpu_usage_us += r.usage.cpu_usage_us;
        e.peak_memory_bytes = std::max(e.peak_memory_bytes, r.usage.peak_memory_bytes);
        e.spill_mib_seconds += r.usage.spill_mib_seconds;  // measured, not a rate of what is held
      }
    }
    d_->core->OnTaskReport(r);
    d_->Idle();
  }

  std::string PoolOf(int64_t job_id) {
    for (const JobRecord& j : Jobs()) {
      if (j.id == job_id) return j.spec.pool;
    }
    return "";
  }

  // Every SCHEDULED task reports RUNNING; every stop sent is answered by the exit.
  void AgentsAct() {
    for (; stops_answered_ < agents_.stops.size(); ++stops_answered_) {
      const auto& [node, cmd] = agents_.stops[stops_answered_];
      for (const JobRecord& j : Jobs()) {
        for (const TaskRecord& t : j.tasks) {
          if (TaskId(t.job_id, t.index) == cmd.task_id && t.attempt == cmd.attempt &&
              t.node == node) {
            // Observed here, not read from the ledger: this attempt ends by preemption.
            if (t.stop == StopIntent::kPreempt) preempted_.insert({t.job_id, t.index, t.attempt});
            Report(t, TaskState::kFailed, 143);
          }
        }
      }
    }
    for (const JobRecord& j : Jobs()) {
      for (const TaskRecord& t : j.tasks) {
        if (t.state == TaskState::kScheduled && !silent_.contains(t.node))
          Report(t, TaskState::kRunning);
      }
    }
  }

  // What the tasks hold now, per attempt (with its pool), as per-second rates (the ledger's
  // definitions, derived here from the allocations, the devices and the pools' ratios).
  std::map<AttemptKey, std::pair<std::string, UsageTotals>> Holding() {
    std::map<AttemptKey, std::pair<std::string, UsageTotals>> out;
    for (const JobRecord& j : Jobs()) {
      for (const TaskRecord& t : j.tasks) {
        if (t.state != TaskState::kScheduled && t.state != TaskState::kRunning) continue;
        const PoolRecord& pool = pools_.at(j.spec.pool);
        auto& [pool_name, u] = out[{t.job_id, t.index, t.attempt}];
        pool_name = j.spec.pool;
        for (const Allocation& a : t.allocations) {
          const DeviceRecord& dev = devices_.at(a.device_id);
          const int64_t offered_tflops =
              dev.physical.milli_tflops * pool.compute_overcommit.permille / 1000;
          u.milli_tflops_seconds += a.amount.milli_tflops;
          u.physical_milli_tflops_seconds +=
              a.amount.milli_tflops * dev.physical.milli_tflops / offered_tflops;
          u.vram_mib_seconds += a.amount.vram_mib;
          if (!dev.mig_profile.empty()) {
            u.mig_instance_seconds += 1;
          } else if (a.exclusive) {
            u.device_seconds += 1;
          }
        }
      }
    }
    return out;
  }

  // Integrates what is held for `seconds`, one second at a time: heartbeats from the nodes that
  // are not silent, a tick, the agents' answers.
  void Run(int seconds) {
    for (int s = 0; s < seconds; ++s) {
      Integrate(Holding(), 1);
      clock_.Advance(kS);
      for (const auto& [name, reg] : nodes_) {
        if (!silent_.contains(name)) d_->core->OnHeartbeat(name, {});
      }
      d_->core->Tick();
      d_->Idle();
      AgentsAct();
    }
  }

  void Integrate(const std::map<AttemptKey, std::pair<std::string, UsageTotals>>& rates,
                 int64_t seconds) {
    for (const auto& [attempt, held] : rates) {
      const UsageTotals& r = held.second;
      for (UsageTotals* e : {&expected_[held.first], &expected_by_attempt_[attempt]}) {
        e->milli_tflops_seconds += r.milli_tflops_seconds * seconds;
        e->physical_milli_tflops_seconds += r.physical_milli_tflops_seconds * seconds;
        e->vram_mib_seconds += r.vram_mib_seconds * seconds;
        e->spill_mib_seconds += r.spill_mib_seconds * seconds;
        e->device_seconds += r.device_seconds * seconds;
        e->mig_instance_seconds += r.mig_instance_seconds * seconds;
      }
    }
  }

  // The tasks SCHEDULED or RUNNING on `node`, as attempts.
  std::set<AttemptKey> ActiveOn(const std::string& node) {
    std::set<AttemptKey> out;
    for (const JobRecord& j : Jobs()) {
      for (const TaskRecord& t : j.tasks) {
        if (t.node == node && (t.state == TaskState::kScheduled || t.state == TaskState::kRunning))
          out.insert({t.job_id, t.index, t.attempt});
      }
    }
    return out;
  }

  int64_t StoredIntervals() {
    auto rows = d_->store->QueryUsage({});
    if (!rows.ok()) return -1;
    int64_t n = 0;
    for (const UsageReportRow& r : *rows) n += r.totals.intervals;
    return n;
  }

  std::string uri_;
  ManualClock clock_;
  RecordingAgents agents_;
  std::unique_ptr<Daemon> d_;
  std::map<std::string, PoolRecord> pools_;
  std::map<std::string, DeviceRecord> devices_;
  std::map<std::string, AgentRegistration> nodes_;
  std::set<std::string> silent_;
  size_t stops_answered_ = 0;
  std::map<std::string, UsageTotals> expected_;            // per pool
  std::map<AttemptKey, UsageTotals> expected_by_attempt_;  // GPU dimensions only
  std::set<AttemptKey> preempted_;                         // attempts stopped to preempt
};

JobSpec Classed(JobSpec s, const std::string& cls) {
  s.priority_class = cls;
  return s;
}

TEST_F(Conservation, LedgerTotalsEqualTheIntegralOfAllocationsAcrossACrash) {
  ASSERT_OK(CreatePool("frac", 2000, 1500));  // compute 2×, memory 1.5× (spill to host RAM)
  ASSERT_OK(CreatePool("whole", 1000, 1000));
  ASSERT_OK(CreatePool("mig", 1000, 1000));
  ASSERT_OK(Register(Node("f1", "frac", 1)));
  ASSERT_OK(Register(Node("w1", "whole", 2)));
  ASSERT_OK(Register(Node("w2", "whole", 2)));
  ASSERT_OK(Register(MigNode("m1", "mig")));

  // Two 300-TFLOPS / 60-GiB slices on one H100 offered at 1978 TFLOPS / 120 GiB: 40 GiB spill.
  ASSERT_OK(Submit(CoreHarness::Fractional("frac", 300'000, 60 * 1024, 2)).status());
  ASSERT_OK(Submit(Classed(CoreHarness::Whole("whole", 2), "low")).status());
  ASSERT_OK(Submit(Classed(CoreHarness::Whole("whole", 1), "low")).status());
  JobSpec mig = CoreHarness::Fractional("mig", 0, 0);
  mig.task_template.resources.shape = RequestShape::kMig;
  mig.task_template.resources.mig_profile = "3g.40gb";
  ASSERT_OK(Submit(mig).status());
  Run(95);
  // A high-priority job needs two GPUs on one node: a low one is preempted and waits.
  ASSERT_OK(Submit(Classed(CoreHarness::Whole("whole", 2), "high")).status());
  Run(105);
  ASSERT_FALSE(preempted_.empty()) << "the high job preempted nothing";
  // w1 goes silent: its lease lapses and its tasks are requeued (LOST), taking w2's room back.
  const std::set<AttemptKey> on_w1 = ActiveOn("w1");
  ASSERT_FALSE(on_w1.empty());
  silent_.insert("w1");
  Run(80);
  for (const AttemptKey& a : on_w1) {  // lost: that attempt holds nothing any more
    for (const JobRecord& j : Jobs()) {
      for (const TaskRecord& t : j.tasks) {
        if (t.job_id != std::get<0>(a) || t.index != std::get<1>(a)) continue;
        EXPECT_GT(t.attempt, std::get<2>(a)) << "not requeued: " << TaskId(t.job_id, t.index);
      }
    }
  }
  // Just past a boundary, the tick closes every running attempt's interval; the batch commits
  // and the core crashes before it hears so (its marks never moved).
  while ((clock_.NowMicros() / kS + 1) % 60 != 0) Run(1);
  const auto held_at_crash = Holding();
  Integrate(held_at_crash, 1);
  clock_.Advance(kS);
  const int64_t before = StoredIntervals();
  d_->core->Tick();  // the completion is queued for the core, never run
  ASSERT_TRUE(WaitFor([&] { return StoredIntervals() > before; }, std::chrono::seconds(60)));
  d_.reset();

  // 44 s more down: the tasks keep their devices on the agents.
  Integrate(held_at_crash, 44);
  clock_.Advance(44 * kS);
  d_ = std::make_unique<Daemon>(uri_, &clock_, &agents_);
  ASSERT_OK(d_->Start());
  ASSERT_OK(Register(Node("f1", "frac", 1), /*with_running=*/true));
  ASSERT_OK(Register(Node("w2", "whole", 2), /*with_running=*/true));
  ASSERT_OK(Register(MigNode("m1", "mig"), /*with_running=*/false));  // its task died meanwhile
  Run(130);

  // Everything that runs ends; what is still pending is cancelled.
  for (const JobRecord& j : Jobs()) {
    for (const TaskRecord& t : j.tasks) {
      if (t.state == TaskState::kRunning) Report(t, TaskState::kSucceeded);
    }
  }
  for (const JobRecord& j : Jobs()) {
    if (!IsTerminal(j.state)) {
      ASSERT_OK(d_->Sync<JobRecord>([&](auto cb) { d_->core->CancelJob(j.id, "", cb); }).status());
    }
  }
  Run(3);
  for (const JobRecord& j : Jobs()) {
    for (const TaskRecord& t : j.tasks) {
      EXPECT_NE(t.state, TaskState::kRunning) << TaskId(t.job_id, t.index);
      EXPECT_NE(t.state, TaskState::kScheduled) << TaskId(t.job_id, t.index);
    }
  }

  // The ledger, per pool, equals the integral, in every dimension.
  for (const auto& [pool, want] : expected_) {
    UsageQuery q;
    q.pool = pool;
    ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rows, d_->store->QueryUsage(q));
    UsageTotals got;
    for (const UsageReportRow& r : rows) got += r.totals;
    SCOPED_TRACE("pool " + pool);
    EXPECT_GT(want.milli_tflops_seconds, 0);
    EXPECT_EQ(got.milli_tflops_seconds, want.milli_tflops_seconds);
    EXPECT_EQ(got.physical_milli_tflops_seconds, want.physical_milli_tflops_seconds);
    EXPECT_EQ(got.vram_mib_seconds, want.vram_mib_seconds);
    EXPECT_EQ(got.spill_mib_seconds, want.spill_mib_seconds);
    EXPECT_EQ(got.device_seconds, want.device_seconds);
    EXPECT_EQ(got.mig_instance_seconds, want.mig_instance_seconds);
    // CPU and memory from the sandbox, where the agent reported an attempt's end.
    EXPECT_EQ(got.cpu_usage_us, want.cpu_usage_us);
    EXPECT_EQ(got.peak_memory_bytes, want.peak_memory_bytes);
  }
  // The preempted attempts, every interval of them and nothing else, are what the report
  // splits out for credits: equal to their own integral.
  UsageTotals want_preempted;
  for (const AttemptKey& a : preempted_) want_preempted += expected_by_attempt_[a];
  UsageQuery split;
  split.split_preempted = true;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> split_rows, d_->store->QueryUsage(split));
  UsageTotals got_preempted;
  for (const UsageReportRow& r : split_rows) {
    if (r.preempted) got_preempted += r.totals;
  }
  EXPECT_GT(want_preempted.device_seconds, 0);
  EXPECT_EQ(got_preempted.device_seconds, want_preempted.device_seconds);
  EXPECT_EQ(got_preempted.milli_tflops_seconds, want_preempted.milli_tflops_seconds);
  EXPECT_EQ(got_preempted.vram_mib_seconds, want_preempted.vram_mib_seconds);
  int64_t spilled = 0;
  for (const auto& [pool, want] : expected_) spilled += want.spill_mib_seconds;
  EXPECT_GT(spilled, 0);
  EXPECT_GT(expected_.at("mig").mig_instance_seconds, 0);
  EXPECT_GT(expected_.at("whole").device_seconds, 0);
  EXPECT_GT(expected_.at("whole").cpu_usage_us, 0);
}

}  // namespace
}  // namespace gpupool::testing
