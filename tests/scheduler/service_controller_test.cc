// ServiceController over a real Scheduler (the core on its loop, the in-memory store): replicas
// are jobs, placed on a registered node; the agents are a gateway that records StartTask, and
// the test reports the replicas' states as an agent would. The controller's clock is a manual
// one (back-off, idle periods); the scheduler's is the system's.
#include "scheduler/service_controller.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "store/memory_services.h"
#include "store/memory_store.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

class Agents final : public AgentGateway {
 public:
  bool StartTask(const std::string&, const StartTaskCommand& cmd) override {
    std::lock_guard lock(mu);
    starts.push_back(cmd);
    return true;
  }
  bool StopTask(const std::string&, const StopTaskCommand& cmd) override {
    std::lock_guard lock(mu);
    stops.push_back(cmd.task_id);
    return true;
  }
  std::vector<StartTaskCommand> Starts() {
    std::lock_guard lock(mu);
    return starts;
  }
  std::vector<std::string> Stops() {
    std::lock_guard lock(mu);
    return stops;
  }
  std::mutex mu;
  std::vector<StartTaskCommand> starts;
  std::vector<std::string> stops;
};

class ServiceControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scheduler_ = std::make_unique<Scheduler>(SchedulerOptions::Defaults(), SystemClock::Get(),
                                             &store_, &agents_);
    Result<int64_t> epoch = store_.AcquireLeadership();
    Result<RecoveredState> state = store_.Recover();
    ASSERT_TRUE(epoch.ok() && state.ok());
    ASSERT_TRUE(scheduler_->Start(*state, *epoch, 20ms).ok());
    PoolRecord pool;
    pool.name = "gpu";
    pool.placement_strategy = "first-fit";
    Status created = CallAndWait<PoolView>([&](auto done) { scheduler_->CreatePool(pool, done); });
    ASSERT_TRUE(created.ok()) << created.ToString();
    TenantRecord tenant;
    tenant.path = "acme";
    created = CallAndWait<TenantView>([&](auto done) { scheduler_->CreateTenant(tenant, done); });
    ASSERT_TRUE(created.ok()) << created.ToString();
    AgentRegistration reg;
    reg.node.name = "n1";
    reg.node.pool = "gpu";
    DeviceRecord d;
    d.id = "GPU-0";
    d.model = "H100-SXM";
    d.physical = {989'000, 81'920};
    reg.node.devices.push_back(d);
    ASSERT_TRUE(CallAndWait<RegistrationResult>([&](auto done) {
                  scheduler_->OnAgentRegister(reg, done);
                }).ok());
    controller_ = NewController();
  }

  void TearDown() override {
    controller_.reset();
    scheduler_->Stop();
  }

  std::unique_ptr<ServiceController> NewController() {
    ServiceControllerOptions o;
    o.tick = 0ms;  // passes by hand
    auto c = std::make_unique<ServiceController>(&services_, scheduler_.get(), &clock_, o);
    EXPECT_TRUE(c->Start().ok());
    return c;
  }

  static ServiceSpec Spec(int32_t min, int32_t max, int64_t milli_tflops = 100'000) {
    ServiceSpec s;
    s.tenant = "acme";
    s.name = "chat";
    s.pool = "gpu";
    s.priority_class = "low";
    s.min_replicas = min;
    s.max_replicas = max;
    s.revision.task_template.command = {"/srv/serve", "--v1"};
    s.revision.task_template.ports = {TaskPort{"http", 8080, "tcp"}};
    s.revision.task_template.resources.fractional = {milli_tflops, 1024};
    s.revision.port = 8080;
    s.revision.readiness_path = "/healthz";
    return s;
  }

  // A pass, then the scheduler's work it caused (submissions stored, placed, dispatched).
  void Pass() {
    controller_->Reconcile();
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(30ms);
      scheduler_->Tick();
      scheduler_->Flush();
    }
  }

  // Reports every started, not yet reported replica task as RUNNING, as its agent would.
  void RunStarted() {
    for (const StartTaskCommand& c : agents_.Starts()) {
      if (reported_.insert(c.task_id + "#" + std::to_string(c.attempt)).second) {
        Report(c, TaskState::kRunning);
      }
    }
    scheduler_->Flush();
  }

  void Report(const StartTaskCommand& c, TaskState state, int32_t exit_code = 0) {
    TaskReport r;
    r.node = "n1";
    r.task_id = c.task_id;
    r.attempt = c.attempt;
    r.state = state;
    r.exit_code = exit_code;
    if (state == TaskState::kFailed) r.reason = "exit code " + std::to_string(exit_code);
    scheduler_->OnTaskReport(r);
    scheduler_->Flush();
  }

  // Waits (real time: the scheduler's) until the service's view satisfies `pred`.
  template <typename Pred>
  ServiceView WaitView(Pred pred, const std::string& what) {
    ServiceView v;
    for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(20ms)) {
      Pass();
      Result<ServiceView> got = controller_->Get("acme", "chat");
      if (got.ok()) v = *got;
      if (got.ok() && pred(v)) return v;
    }
    ADD_FAILURE() << "timed out waiting for " << what << "; below " << v.below_code << ": "
                  << v.below_reason << ", ready " << v.ready << "/" << v.desired;
    return v;
  }

  Result<JobRecord> Job(int64_t id) {
    return CallAndGet<JobRecord>([&](auto done) { scheduler_->GetJob(id, done); });
  }

  ManualClock clock_;
  MemoryStore store_;
  MemoryServices services_;
  Agents agents_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ServiceController> controller_;
  std::set<std::string> reported_;
};

TEST_F(ServiceControllerTest, RefusesABadSpecNamingTheField) {
  ServiceSpec s = Spec(3, 2);
  Result<ServiceView> v = controller_->Create(s);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("service.min_replicas"), std::string::npos);
  s = Spec(1, 2);
  s.revision.port = 9000;
  v = controller_->Create(s);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("service.port: 9000 is not one of template.ports"),
            std::string::npos)
      << v.status().ToString();
  s = Spec(1, 2);
  s.name = "Chat!";
  EXPECT_NE(controller_->Create(s).status().message().find("service.name"), std::string::npos);
  ASSERT_TRUE(controller_->Create(Spec(1, 2)).ok());
  EXPECT_EQ(controller_->Create(Spec(1, 2)).status().code(), StatusCode::kAlreadyExists);
  Result<std::vector<ServiceRecord>> stored = services_.List();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), 1u);
}

TEST_F(ServiceControllerTest, KeepsMinReplicasAsJobsAndReplacesOneThatDiesAfterABackOff) {
  ASSERT_TRUE(controller_->Create(Spec(2, 4)).ok());
  ServiceView v = WaitView([](const ServiceView& w) { return w.replicas.size() == 2; }, "2");
  EXPECT_EQ(v.desired, 2);
  EXPECT_EQ(v.below_code, "STARTING");
  // Each replica is a one-task job of the service's tenant, marked as the service's.
  for (const ServiceReplicaView& r : v.replicas) {
    Result<JobRecord> job = Job(r.job_id);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->spec.service_id, v.record.id);
    EXPECT_EQ(job->spec.service_generation, 1);
    EXPECT_EQ(job->spec.tenant, "acme");
    EXPECT_EQ(job->spec.task_template.command, (std::vector<std::string>{"/srv/serve", "--v1"}));
  }
  RunStarted();
  v = WaitView([](const ServiceView& w) { return w.ready == 2; }, "2 ready");
  EXPECT_EQ(v.below_code, "");
  EXPECT_EQ(agents_.Starts().size(), 2u);

  // One replica dies: the service says why it is short, and starts none during the back-off.
  Report(agents_.Starts()[0], TaskState::kFailed, 3);
  v = WaitView([](const ServiceView& w) { return w.replicas.size() == 1; }, "the death seen");
  EXPECT_EQ(v.below_code, "REPLICA_FAILING");
  EXPECT_NE(v.below_reason.find("1 of 2 replicas ready"), std::string::npos) << v.below_reason;
  EXPECT_NE(v.below_reason.find("exit code 3"), std::string::npos) << v.below_reason;
  EXPECT_EQ(v.consecutive_failures, 1);
  Pass();
  EXPECT_EQ(controller_->Get("acme", "chat")->replicas.size(), 1u);

  // After the back-off it is replaced by a new job.
  clock_.Advance(1'100'000);
  v = WaitView([](const ServiceView& w) { return w.replicas.size() == 2; }, "the replacement");
  RunStarted();
  v = WaitView([](const ServiceView& w) { return w.ready == 2; }, "2 ready again");
  EXPECT_EQ(agents_.Starts().size(), 3u);
  // A replica that has served a while clears the failure count.
  clock_.Advance(31'000'000);
  v = WaitView([](const ServiceView& w) { return w.consecutive_failures == 0; }, "reset");
}

TEST_F(ServiceControllerTest, ANewRevisionRollsOutWithinTheSurgeAndCanBeRolledBack) {
  ASSERT_TRUE(controller_->Create(Spec(2, 2)).ok());
  WaitView([](const ServiceView& w) { return w.replicas.size() == 2; }, "2");
  RunStarted();
  ServiceView v = WaitView([](const ServiceView& w) { return w.ready == 2; }, "2 ready");
  const std::vector<int64_t> first = {v.replicas[0].job_id, v.replicas[1].job_id};

  Result<ServiceView> u = controller_->Update("acme", "chat", nullptr, [](ServiceSpec* s) {
    s->revision.task_template.command = {"/srv/serve", "--v2"};
    return Status::Ok();
  });
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->record.generation, 2);
  // Surge 1, unavailable 0: one new replica, no old one stopped while it is not ready.
  v = WaitView([](const ServiceView& w) { return w.replicas.size() == 3; }, "the surge");
  Pass();
  v = *controller_->Get("acme", "chat");
  EXPECT_EQ(v.replicas.size(), 3u);
  EXPECT_EQ(v.ready, 2);
  EXPECT_EQ(v.updated, 1);
  // The new one ready: an old one goes, another new one starts; and so on to the end.
  for (int round = 0; round < 2; ++round) {
    RunStarted();
    WaitView([&](const ServiceView& w) { return w.updated >= round + 2 || w.updated == 2; },
             "rollout step");
  }
  RunStarted();
  v = WaitView(
      [](const ServiceView& w) { return w.replicas.size() == 2 && w.updated == 2 && w.ready == 2; },
      "rolled out");
  for (const ServiceReplicaView& r : v.replicas) {
    EXPECT_EQ(r.generation, 2);
    EXPECT_EQ(Job(r.job_id)->spec.task_template.command.back(), "--v2");
  }
  for (int64_t id : first) {
    Result<JobRecord> old = Job(id);
    ASSERT_TRUE(old.ok());
    EXPECT_TRUE(CancelRequested(old->state)) << ToString(old->state);
  }

  // Rollback: generation 3 with the first revision's template.
  Result<ServiceView> back = controller_->Rollback("acme", "chat", nullptr);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->record.generation, 3);
  EXPECT_EQ(back->record.spec.revision.task_template.command.back(), "--v1");
  ASSERT_TRUE(back->record.previous.has_value());
  EXPECT_EQ(back->record.previous->task_template.command.back(), "--v2");
  for (int round = 0; round < 4; ++round) {
    RunStarted();
    Pass();
  }
  v = WaitView([](const ServiceView& w) { return w.updated == 2 && w.replicas.size() == 2; },
               "rolled back");
  Result<std::vector<ServiceRecord>> stored = services_.List();
  ASSERT_TRUE(stored.ok() && stored->size() == 1);
  EXPECT_EQ((*stored)[0].generation, 3);
}

TEST_F(ServiceControllerTest, SaysWhyItIsShortWhenAReplicaDoesNotFitOrIsPreempted) {
  // 400 TFLOPS each on a 989-TFLOPS GPU: two fit, the third waits for capacity.
  ASSERT_TRUE(controller_->Create(Spec(3, 3, 400'000)).ok());
  WaitView([](const ServiceView& w) { return w.replicas.size() == 3; }, "3");
  RunStarted();
  ServiceView v =
      WaitView([](const ServiceView& w) { return w.below_code == "NO_CAPACITY"; }, "NO_CAPACITY");
  EXPECT_EQ(v.ready, 2);
  EXPECT_NE(v.below_reason.find("2 of 3 replicas ready"), std::string::npos) << v.below_reason;

  // A higher class takes the GPU: the replicas are preempted and the service says so.
  JobSpec big;
  big.tenant = "acme";
  big.pool = "gpu";
  big.priority_class = "high";
  big.task_template.command = {"/bin/train"};
  big.task_template.resources.fractional = {900'000, 1024};
  ASSERT_TRUE(CallAndGet<JobRecord>([&](auto done) { scheduler_->SubmitJob(big, done); }).ok());
  for (int i = 0; i < 20 && agents_.Stops().empty(); ++i) Pass();
  ASSERT_FALSE(agents_.Stops().empty());
  // The agent reports the victims stopped.
  for (const std::string& task : agents_.Stops()) {
    for (const StartTaskCommand& c : agents_.Starts()) {
      if (c.task_id == task) Report(c, TaskState::kPreempted);
    }
  }
  v = WaitView([](const ServiceView& w) { return w.below_code == "PREEMPTED"; }, "PREEMPTED");
  EXPECT_NE(v.below_reason.find("preempted"), std::string::npos) << v.below_reason;
}

TEST_F(ServiceControllerTest, ScalesOnReportedLoadAndToZeroAfterItsIdlePeriod) {
  ServiceSpec s = Spec(0, 4);
  s.target_in_flight = 2;
  s.idle_ms = 60'000;
  ASSERT_TRUE(controller_->Create(s).ok());
  Pass();
  EXPECT_TRUE(controller_->Get("acme", "chat")->replicas.empty());
  const int64_t id = controller_->Get("acme", "chat")->record.id;
  // 6 in flight at 2 per replica: 3 replicas, within the 2-s burst window.
  ServiceLoadSample load;
  load.in_flight = 6;
  load.arrivals_per_s = 6;
  load.service_s = 1;
  controller_->ReportLoad(id, load);
  ServiceView v = WaitView([](const ServiceView& w) { return w.replicas.size() == 3; }, "3");
  EXPECT_EQ(v.desired, 3);
  RunStarted();
  WaitView([](const ServiceView& w) { return w.ready == 3; }, "3 ready");
  // No request for the idle period: down to zero, every replica's job cancelled.
  clock_.Advance(61'000'000);
  controller_->ReportLoad(id, ServiceLoadSample{});
  v = WaitView([](const ServiceView& w) { return w.desired == 0 && w.replicas.empty(); }, "zero");
  EXPECT_NE(v.desired_reason.find("to zero"), std::string::npos) << v.desired_reason;
}

TEST_F(ServiceControllerTest, ANewLeaderFindsTheReplicasAndCancelsThoseOfDeletedServices) {
  ASSERT_TRUE(controller_->Create(Spec(2, 2)).ok());
  WaitView([](const ServiceView& w) { return w.replicas.size() == 2; }, "2");
  RunStarted();
  WaitView([](const ServiceView& w) { return w.ready == 2; }, "2 ready");
  const size_t started = agents_.Starts().size();

  // A new controller (a failover) holds the two it finds: no third job.
  controller_ = NewController();
  ServiceView v = WaitView([](const ServiceView& w) { return w.ready == 2; }, "recovered");
  EXPECT_EQ(v.replicas.size(), 2u);
  EXPECT_EQ(agents_.Starts().size(), started);

  // The record deleted behind its back (a crash between the two steps of Delete): the next
  // leader cancels the orphaned replicas.
  const int64_t id = v.record.id;
  controller_.reset();
  ASSERT_TRUE(services_.Delete(id).ok());
  controller_ = NewController();
  Pass();
  for (const ServiceReplicaView& r : v.replicas) {
    Result<JobRecord> job = Job(r.job_id);
    ASSERT_TRUE(job.ok());
    EXPECT_TRUE(CancelRequested(job->state)) << r.job_id << " " << ToString(job->state);
  }
}

TEST_F(ServiceControllerTest, DeleteStopsEveryReplica) {
  ASSERT_TRUE(controller_->Create(Spec(2, 2)).ok());
  ServiceView v = WaitView([](const ServiceView& w) { return w.replicas.size() == 2; }, "2");
  ASSERT_TRUE(controller_->Delete("acme", "chat", nullptr).ok());
  EXPECT_EQ(controller_->Get("acme", "chat").status().code(), StatusCode::kNotFound);
  Pass();
  for (const ServiceReplicaView& r : v.replicas) {
    EXPECT_TRUE(CancelRequested(Job(r.job_id)->state));
  }
  EXPECT_TRUE(services_.List()->empty());
}

// What happens to a service reaches its tenant's webhooks through the event log: created,
// short of capacity (once), scaled, recovered, updated, deleted — each with the service's tenant
// and subject "service/<id>".
TEST_F(ServiceControllerTest, TellsItsTenantWhatHappensThroughTheEventLog) {
  // 400 TFLOPS each on a 989-TFLOPS GPU: two fit, the third waits for capacity.
  ASSERT_TRUE(controller_->Create(Spec(3, 3, 400'000)).ok());
  const int64_t id = controller_->Get("acme", "chat")->record.id;
  WaitView([](const ServiceView& w) { return w.replicas.size() == 3; }, "3");
  RunStarted();
  WaitView([](const ServiceView& w) { return w.below_code == "NO_CAPACITY"; }, "NO_CAPACITY");
  for (int i = 0; i < 5; ++i) Pass();  // still short: told once
  // Two are enough: the bounds change, the desired count follows, the shortfall is over.
  ASSERT_TRUE(controller_
                  ->Update("acme", "chat", nullptr,
                           [](ServiceSpec* s) {
                             s->min_replicas = 2;
                             s->max_replicas = 2;
                             return Status::Ok();
                           })
                  .ok());
  WaitView([](const ServiceView& w) { return w.desired == 2 && w.below_code.empty(); }, "2 ready");
  Pass();
  ASSERT_TRUE(controller_->Delete("acme", "chat", nullptr).ok());

  const std::string subject = "service/" + std::to_string(id);
  std::vector<EventRecord> events;
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(20ms)) {
    scheduler_->Flush();
    Result<std::vector<EventRecord>> got = store_.ListEvents(subject, 0);
    ASSERT_TRUE(got.ok());
    events = *got;
    if (!events.empty() && events.back().kind == "service.deleted") break;
  }
  std::vector<std::string> kinds;
  for (const EventRecord& e : events) {
    kinds.push_back(e.kind);
    EXPECT_EQ(e.subject, subject);
    EXPECT_EQ(e.tenant, "acme");
    EXPECT_EQ(e.message.rfind("chat: ", 0), 0u) << e.message;
    EXPECT_GT(e.time_us, 0);
  }
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"service.created", "service.degraded", "service.updated",
                                      "service.scaled", "service.recovered", "service.deleted"}));
  if (kinds.size() == 6) {
    EXPECT_NE(events[1].message.find("NO_CAPACITY: 2 of 3 replicas ready"), std::string::npos)
        << events[1].message;
    EXPECT_NE(events[2].message.find("scaling changed: 2..2 replicas"), std::string::npos)
        << events[2].message;
    EXPECT_NE(events[3].message.find("3 → 2 replicas"), std::string::npos) << events[3].message;
  }
}

}  // namespace
}  // namespace gpupool
