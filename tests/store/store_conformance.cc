#include "tests/store/store_conformance.h"

#include <atomic>
#include <future>
#include <thread>

#include "store/validate.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {

void StoreConformanceTest::SetUp() {
  harness_ = GetParam().make();
  ASSERT_OK(harness_->NewDatabase());
  store_ = OpenStore();
  ASSERT_NE(store_, nullptr);
  ASSERT_OK(store_->AcquireLeadership().status());
}

std::unique_ptr<Store> StoreConformanceTest::OpenStore() {
  auto r = harness_->Open();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

namespace {

std::vector<EventRecord> Events(Store& store, const std::string& prefix, int limit = 0) {
  auto r = store.ListEvents(prefix, limit);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<EventRecord>{};
}

RecoveredState MustRecover(Store& store) {
  auto r = store.Recover();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : RecoveredState{};
}

EventRecord Ev(int64_t t, const std::string& subject, const std::string& message = "m") {
  return EventRecord{t, "job.state", subject, message, "acme"};
}

TEST_P(StoreConformanceTest, FreshDatabaseIsEmpty) {
  RecoveredState s = MustRecover(*store_);
  EXPECT_TRUE(s.pools.empty());
  EXPECT_TRUE(s.nodes.empty());
  EXPECT_TRUE(s.jobs.empty());
  EXPECT_EQ(s.max_job_id, 0);
  EXPECT_TRUE(Events(*store_, "").empty());
}

TEST_P(StoreConformanceTest, EveryMutationRoundTripsThroughRecover) {
  PoolRecord pool = SamplePool("gpu-a");
  NodeRecord node = SampleNode("n1", "gpu-a");
  JobRecord j7 = SampleJob(7, 3);
  JobRecord j3 = SampleJob(3, 1);
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{pool}, UpsertNode{node}, InsertJob{j7}}));
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{j3}, AppendEvent{Ev(5, "job/3", "submitted")}}));

  // Updates: job state, a task with new allocations, node state.
  ASSERT_OK(ApplyAndWait(*store_, {UpdateJob{7, JobState::kFailed, "task 7.1 failed", 99}}));
  TaskRecord t = j7.tasks[1];
  t.state = TaskState::kFailed;
  t.exit_code = 137;
  t.reason = "OOM-killed";
  t.allocations = {Allocation{"n1-GPU-0", Resources{500, 1024}},
                   Allocation{"n1-GPU-2", Resources{250, 512}}};
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}, SetNodeState{"n1", NodeState::kDraining}}));

  j7.state = JobState::kFailed;
  j7.reason = "task 7.1 failed";
  j7.finish_us = 99;
  j7.tasks[1] = t;
  node.state = NodeState::kDraining;

  // A second handle (another daemon, or this one after a restart) reads the same state.
  std::unique_ptr<Store> other = OpenStore();
  ASSERT_NE(other, nullptr);
  for (Store* s : {store_.get(), other.get()}) {
    RecoveredState got = MustRecover(*s);
    ASSERT_EQ(got.pools.size(), 1u);
    EXPECT_EQ(got.pools[0], pool);
    ASSERT_EQ(got.nodes.size(), 1u);
    EXPECT_EQ(got.nodes[0], node);
    ASSERT_EQ(got.jobs.size(), 2u);
    EXPECT_EQ(got.jobs[0], j3);  // ordered by id
    EXPECT_EQ(got.jobs[1], j7);
    EXPECT_EQ(got.max_job_id, 7);
    EXPECT_EQ(Events(*s, "job/3"), std::vector<EventRecord>{Ev(5, "job/3", "submitted")});
  }
}

TEST_P(StoreConformanceTest, UpsertsReplaceWholeRecords) {
  PoolRecord pool = SamplePool("gpu-a");
  NodeRecord node = SampleNode("n1", "gpu-a");
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{pool}, UpsertNode{node}}));
  pool.visibility = Visibility::kPublic;
  pool.allowed_tenants.clear();
  pool.compute_overcommit = Ratio{2000};
  pool.mps_tenant_isolation = false;
  pool.required_capabilities = {"sandbox"};
  pool.network = TaskNetwork::kHost;
  pool.pinned_images = {"docker.io/library/busybox:1.36"};  // one unpinned
  node.devices.resize(1);
  node.links.clear();
  node.labels = {{"zone", "eu-2"}};
  node.capabilities = {{"sandbox", false, "off"}};  // a re-registration replaces the list
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{pool}, UpsertNode{node}}));
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.pools.size(), 1u);
  EXPECT_EQ(got.pools[0], pool);
  ASSERT_EQ(got.nodes.size(), 1u);
  EXPECT_EQ(got.nodes[0], node);
}

TEST_P(StoreConformanceTest, UpdateTaskReplacesAllocations) {
  JobRecord j = SampleJob(1, 1);
  j.tasks[0].allocations = {Allocation{"a", {1, 2}}, Allocation{"b", {3, 4}}};
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{j}}));
  TaskRecord t = j.tasks[0];
  t.allocations.clear();
  t.state = TaskState::kPending;
  t.node.clear();
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}}));
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].tasks, std::vector<TaskRecord>{t});
}

// Why a task is being stopped and who preempted it are typed facts, stored and recovered as
// such (never parsed from `reason`); a job may be CANCELLING while its tasks stop.
TEST_P(StoreConformanceTest, StopIntentAndPreemptionRoundTrip) {
  JobRecord j = SampleJob(4, 3);
  j.tasks[0].stop = StopIntent::kDrain;
  j.tasks[1].stop = StopIntent::kPreempt;
  j.tasks[1].preempted_by = Preemption{9, 2, PreemptRule::kReclaim, /*reserved=*/true};
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{j}}));
  TaskRecord t = j.tasks[2];
  t.stop = StopIntent::kCancel;
  t.preempted_by = Preemption{8, 0, PreemptRule::kPriority, /*reserved=*/false};
  TaskRecord requeued = j.tasks[1];
  requeued.stop = StopIntent::kNone;  // requeued: the stop is over, the last preemption stays
  requeued.attempt = 1;
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}, UpdateTask{requeued},
                                   UpdateJob{4, JobState::kCancelling, "cancelling", 0}}));
  j.tasks[2] = t;
  j.tasks[1] = requeued;
  j.state = JobState::kCancelling;
  j.reason = "cancelling";
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0], j);
}

TEST_P(StoreConformanceTest, BatchIsAllOrNothing) {
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool("gpu-a")}}));
  // The last mutation fails: nothing of the batch may remain.
  TaskRecord unknown = SampleJob(99, 1).tasks[0];
  Status st = ApplyAndWait(
      *store_, {InsertJob{SampleJob(1, 2)}, AppendEvent{Ev(1, "job/1")},
                UpsertPool{SamplePool("gpu-b")}, DeletePool{"gpu-a"}, UpdateTask{unknown}});
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), TaskNotFoundMessage(99, 0));
  RecoveredState got = MustRecover(*store_);
  EXPECT_TRUE(got.jobs.empty());
  EXPECT_EQ(got.max_job_id, 0);
  ASSERT_EQ(got.pools.size(), 1u);
  EXPECT_EQ(got.pools[0], SamplePool("gpu-a"));
  EXPECT_TRUE(Events(*store_, "").empty());
  // The store still works afterwards.
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{SampleJob(1, 2)}}));
}

TEST_P(StoreConformanceTest, ErrorCodesAndMessages) {
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{SampleJob(5, 1)}, UpsertPool{SamplePool("p")},
                                   UpsertNode{SampleNode("n1", "p")}}));
  struct Case {
    std::string name;
    std::vector<Mutation> batch;
    StatusCode code;
    std::string message;  // empty: not compared
  };
  JobRecord bad_task = SampleJob(8, 1);
  bad_task.tasks[0].job_id = 9;
  JobRecord nul = SampleJob(8, 1);
  nul.reason = std::string("a\0b", 3);
  JobRecord bad_utf8 = SampleJob(8, 1);
  bad_utf8.spec.tenant = "\xff\xfe";
  TaskRecord missing_task = SampleJob(5, 3).tasks[2];
  const std::vector<Case> cases = {
      {"duplicate job",
       {InsertJob{SampleJob(5, 1)}},
       StatusCode::kAlreadyExists,
       JobExistsMessage(5)},
      {"unknown job",
       {UpdateJob{6, JobState::kCancelled, "", 0}},
       StatusCode::kNotFound,
       JobNotFoundMessage(6)},
      {"unknown task index",
       {UpdateTask{missing_task}},
       StatusCode::kNotFound,
       TaskNotFoundMessage(5, 2)},
      {"unknown pool", {DeletePool{"nope"}}, StatusCode::kNotFound, PoolNotFoundMessage("nope")},
      {"pool with nodes",
       {DeletePool{"p"}},
       StatusCode::kFailedPrecondition,
       PoolHasNodesMessage("p")},
      {"node in unknown pool",
       {UpsertNode{SampleNode("n2", "nope")}},
       StatusCode::kNotFound,
       NodePoolNotFoundMessage("n2", "nope")},
      {"unknown node",
       {SetNodeState{"n9", NodeState::kReady}},
       StatusCode::kNotFound,
       NodeNotFoundMessage("n9")},
      {"task of another job", {InsertJob{bad_task}}, StatusCode::kInvalidArgument, ""},
      {"NUL byte", {InsertJob{nul}}, StatusCode::kInvalidArgument, ""},
      {"invalid UTF-8", {InsertJob{bad_utf8}}, StatusCode::kInvalidArgument, ""},
      {"job id zero", {InsertJob{SampleJob(0, 0)}}, StatusCode::kInvalidArgument, ""},
  };
  for (const Case& c : cases) {
    Status st = ApplyAndWait(*store_, c.batch);
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st.ToString();
    if (!c.message.empty()) {
      EXPECT_EQ(st.message(), c.message) << c.name;
    }
  }
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0], SampleJob(5, 1));
  EXPECT_EQ(got.nodes.size(), 1u);
}

QuotaRecord Quota(const std::string& tenant, const std::string& pool, int64_t scale) {
  QuotaRecord q;
  q.tenant = tenant;
  q.pool = pool;
  q.guaranteed = QuotaAmount{Resources{1000 * scale, 2048 * scale}, static_cast<int32_t>(scale)};
  q.limit = QuotaAmount{Resources{3000 * scale, 0}, 0};
  return q;
}

TEST_P(StoreConformanceTest, TenantsAndQuotasRoundTrip) {
  // Keys whose bytewise order differs from a natural-language collation ("B" < "a" bytewise).
  std::vector<TenantRecord> tenants = {
      {"B-org", 1}, {"acme", 2}, {"acme/ml", 3}, {"acme/ml/bob", 4}};
  ASSERT_OK(ApplyAndWait(
      *store_, {UpsertTenant{tenants[2]}, UpsertTenant{tenants[0]}, UpsertTenant{tenants[3]},
                UpsertTenant{tenants[1]}, SetQuota{Quota("acme", "pool-b", 1)},
                SetQuota{Quota("acme", "Pool-a", 2)}, SetQuota{Quota("acme/ml", "pool-b", 3)}}));
  // Replace one quota, delete another, re-stamp a tenant.
  tenants[1].create_us = 20;
  ASSERT_OK(ApplyAndWait(*store_, {SetQuota{Quota("acme", "pool-b", 5)},
                                   DeleteQuota{"acme", "Pool-a"}, UpsertTenant{tenants[1]}}));
  RecoveredState got = MustRecover(*store_);
  EXPECT_EQ(got.tenants, tenants);
  EXPECT_EQ(got.quotas,
            (std::vector<QuotaRecord>{Quota("acme", "pool-b", 5), Quota("acme/ml", "pool-b", 3)}));

  // Deleting a tenant takes its quotas with it.
  ASSERT_OK(ApplyAndWait(*store_, {DeleteTenant{"acme/ml"}}));
  got = MustRecover(*store_);
  EXPECT_EQ(got.tenants.size(), 3u);
  EXPECT_EQ(got.quotas, std::vector<QuotaRecord>{Quota("acme", "pool-b", 5)});

  // Errors, and nothing applied.
  Status st = ApplyAndWait(*store_, {UpsertTenant{{"x", 1}}, SetQuota{Quota("nobody", "p", 1)}});
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), TenantNotFoundMessage("nobody"));
  st = ApplyAndWait(*store_, {DeleteTenant{"nobody"}});
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), TenantNotFoundMessage("nobody"));
  st = ApplyAndWait(*store_, {DeleteQuota{"acme", "nope"}});
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), QuotaNotFoundMessage("acme", "nope"));
  st = ApplyAndWait(*store_, {UpsertTenant{{"", 1}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(MustRecover(*store_).tenants.size(), 3u);
}

// Issue 10: a task's usage (from its cgroup) is stored with the task, on insert and update.
TEST_P(StoreConformanceTest, TaskUsageRoundTrips) {
  JobRecord j = SampleJob(5, 2);
  j.tasks[1].usage = {7, 8, 9, 10};
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool(j.spec.pool)}, InsertJob{j}}));
  TaskRecord t = j.tasks[0];
  t.usage = {1'500'000, 33'554'432, 1};
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}}));
  RecoveredState s = MustRecover(*store_);
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].tasks[0].usage, (TaskUsageRecord{1'500'000, 33'554'432, 1}));
  EXPECT_EQ(s.jobs[0].tasks[1].usage, (TaskUsageRecord{7, 8, 9, 10}));  // measured spill too
}

// Issue 25: where a running task's declared ports are published is stored with the task (and
// emptied again with it); a port the store cannot have come from the API is refused.
TEST_P(StoreConformanceTest, TaskEndpointsRoundTripAndBadPortsAreRefused) {
  JobRecord j = SampleJob(6, 2);
  j.tasks[1].endpoints = {{{"", 53, "udp"}, "node-1", 30002}};
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool(j.spec.pool)}, InsertJob{j}}));
  TaskRecord t = j.tasks[0];
  t.state = TaskState::kRunning;
  t.endpoints = {{{"http", 8080, "tcp"}, "node-0.example", 30001},
                 {{"", 53, "udp"}, "fd00::1", 53}};
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}}));
  RecoveredState s = MustRecover(*store_);
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].spec.task_template.ports, j.spec.task_template.ports);
  EXPECT_EQ(s.jobs[0].tasks[0].endpoints, t.endpoints);
  EXPECT_EQ(s.jobs[0].tasks[1].endpoints, j.tasks[1].endpoints);
  t.endpoints.clear();
  ASSERT_OK(ApplyAndWait(*store_, {UpdateTask{t}}));
  EXPECT_TRUE(MustRecover(*store_).jobs[0].tasks[0].endpoints.empty());

  JobRecord bad = SampleJob(7, 1);
  bad.spec.task_template.ports = {{"", 80, "sctp"}};
  Status st = ApplyAndWait(*store_, {InsertJob{bad}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("job.ports[0].protocol"), std::string::npos) << st.ToString();
}

// Issue 10: a device fault is one row per (node, device); clearing it replaces the row.
TEST_P(StoreConformanceTest, DeviceFaultsRoundTripAndAreReplacedByTheirKey) {
  DeviceFaultRecord f{"n1", "GPU-1", "XID 79 (GPU has fallen off the bus)", 1000, 2000, false,
                      "",   0};
  DeviceFaultRecord g{"n1", "GPU-0", "uncorrectable (double-bit) ECC error", 7, 8, false, "", 0};
  ASSERT_OK(ApplyAndWait(*store_, {SetDeviceFault{f}, SetDeviceFault{g}}));
  RecoveredState s = MustRecover(*store_);
  EXPECT_EQ(s.device_faults, (std::vector<DeviceFaultRecord>{g, f}));  // by node, device
  f.cleared = true;
  f.cleared_by = "admin@example";
  f.cleared_us = 3000;
  ASSERT_OK(ApplyAndWait(*store_, {SetDeviceFault{f}}));
  s = MustRecover(*store_);
  EXPECT_EQ(s.device_faults, (std::vector<DeviceFaultRecord>{g, f}));
  DeviceFaultRecord bad = f;
  bad.fault_id = 0;
  Status st = ApplyAndWait(*store_, {SetDeviceFault{bad}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(st.message(), "device fault: fault_id must be > 0");
}

TEST_P(StoreConformanceTest, DeviceSlotsAreSetReplacedAndDeletedPerDevice) {
  DeviceSlotsRecord a{"n1", "GPU-1", 4, "admin@example", 1000};
  DeviceSlotsRecord b{"n0", "GPU-0/mig-3g.40gb-0", 2, "admin@example", 2000};
  ASSERT_OK(ApplyAndWait(*store_, {SetDeviceSlots{a}, SetDeviceSlots{b}}));
  EXPECT_EQ(MustRecover(*store_).device_slots, (std::vector<DeviceSlotsRecord>{b, a}));
  a.slots = 8;
  a.set_us = 3000;
  ASSERT_OK(ApplyAndWait(*store_, {SetDeviceSlots{a}}));
  EXPECT_EQ(MustRecover(*store_).device_slots, (std::vector<DeviceSlotsRecord>{b, a}));
  // Slots 0 gives the device back to its pool's default: the row goes.
  ASSERT_OK(ApplyAndWait(*store_, {SetDeviceSlots{DeviceSlotsRecord{"n1", "GPU-1", 0, "x", 4}}}));
  EXPECT_EQ(MustRecover(*store_).device_slots, (std::vector<DeviceSlotsRecord>{b}));
  // Out of range: refused, nothing of the batch applied.
  DeviceSlotsRecord bad{"n2", "GPU-0", 65, "x", 5};
  Status st = ApplyAndWait(*store_, {SetDeviceSlots{a}, SetDeviceSlots{bad}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(st.message(), "device slots: slots 65 outside 0..64");
  EXPECT_EQ(MustRecover(*store_).device_slots, (std::vector<DeviceSlotsRecord>{b}));
}

TEST_P(StoreConformanceTest, MigLayoutsAreStoredAndReplacedPerGpu) {
  MigLayoutRecord a{"n1",
                    "GPU-1",
                    "3g.40gb@0+3g.40gb@4",
                    1,
                    MigLayoutState::kApplying,
                    "set by key admin-1",
                    "key admin-1",
                    1000};
  MigLayoutRecord b{"n0",
                    "GPU-0",
                    "",
                    4,
                    MigLayoutState::kFailed,
                    "re-layout refused: 'quoted' \"text\", {braces}",
                    "scheduler",
                    2000};
  ASSERT_OK(ApplyAndWait(*store_, {PutMigLayout{a}, PutMigLayout{b}}));
  EXPECT_EQ(MustRecover(*store_).mig_layouts, (std::vector<MigLayoutRecord>{b, a}));
  a.state = MigLayoutState::kApplied;
  a.generation = 2;
  a.updated_us = 3000;
  ASSERT_OK(ApplyAndWait(*store_, {PutMigLayout{a}}));
  EXPECT_EQ(MustRecover(*store_).mig_layouts, (std::vector<MigLayoutRecord>{b, a}));
  // No generation: refused, nothing of the batch applied.
  MigLayoutRecord bad = a;
  bad.gpu = "GPU-9";
  bad.generation = 0;
  MigLayoutRecord c = a;
  c.node = "n2";
  Status st = ApplyAndWait(*store_, {PutMigLayout{c}, PutMigLayout{bad}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(st.message(), "MIG layout: generation must be > 0");
  EXPECT_EQ(MustRecover(*store_).mig_layouts, (std::vector<MigLayoutRecord>{b, a}));
}

TEST_P(StoreConformanceTest, DeletePool) {
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool("a")}, UpsertPool{SamplePool("b")}}));
  ASSERT_OK(ApplyAndWait(*store_, {DeletePool{"a"}}));
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.pools.size(), 1u);
  EXPECT_EQ(got.pools[0].name, "b");
}

TEST_P(StoreConformanceTest, MutationsInOneBatchSeeEachOther) {
  JobRecord j = SampleJob(4, 2);
  TaskRecord t = j.tasks[0];
  t.state = TaskState::kRunning;
  ASSERT_OK(ApplyAndWait(
      *store_,
      {UpsertPool{SamplePool("p")}, UpsertNode{SampleNode("n", "p")}, InsertJob{j}, UpdateTask{t},
       UpdateJob{4, JobState::kRunning, "started", 0}, SetNodeState{"n", NodeState::kReady}}));
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.jobs.size(), 1u);
  EXPECT_EQ(got.jobs[0].tasks[0], t);
  EXPECT_EQ(got.jobs[0].reason, "started");
  EXPECT_EQ(got.nodes[0].state, NodeState::kReady);
}

TEST_P(StoreConformanceTest, ApplyBeforeLeadershipFails) {
  std::unique_ptr<Store> fresh = OpenStore();
  ASSERT_NE(fresh, nullptr);
  Status st = ApplyAndWait(*fresh, {InsertJob{SampleJob(1, 1)}});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
}

TEST_P(StoreConformanceTest, NewLeaderFencesTheOldOne) {
  ASSERT_OK(ApplyAndWait(*store_, {InsertJob{SampleJob(1, 1)}}));
  std::unique_ptr<Store> second = OpenStore();
  ASSERT_NE(second, nullptr);
  auto first_epoch = store_->AcquireLeadership();  // re-acquiring moves the epoch on too
  ASSERT_OK(first_epoch.status());
  auto second_epoch = second->AcquireLeadership();
  ASSERT_OK(second_epoch.status());
  EXPECT_GT(*second_epoch, *first_epoch);

  Status st = ApplyAndWait(*store_, {InsertJob{SampleJob(2, 1)}, AppendEvent{Ev(1, "job/2")}});
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  ASSERT_OK(ApplyAndWait(*second, {InsertJob{SampleJob(3, 1)}}));

  RecoveredState got = MustRecover(*second);
  ASSERT_EQ(got.jobs.size(), 2u);
  EXPECT_EQ(got.jobs[0].id, 1);
  EXPECT_EQ(got.jobs[1].id, 3);
  EXPECT_TRUE(Events(*second, "").empty());
}

TEST_P(StoreConformanceTest, ListEventsByPrefixInOrder) {
  ASSERT_OK(
      ApplyAndWait(*store_, {AppendEvent{Ev(1, "job/1", "a")}, AppendEvent{Ev(2, "job/12", "b")},
                             AppendEvent{Ev(3, "task/1.0", "c")}}));
  ASSERT_OK(ApplyAndWait(*store_, {AppendEvent{Ev(4, "job/1", "d")}}));
  std::vector<EventRecord> all = Events(*store_, "job/1");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].message, "a");
  EXPECT_EQ(all[1].message, "b");
  EXPECT_EQ(all[2].message, "d");
  EXPECT_EQ(Events(*store_, "job/1", 2).size(), 2u);
  EXPECT_EQ(Events(*store_, "", 0).size(), 4u);
  EXPECT_EQ(Events(*store_, "task/").size(), 1u);
  // Prefixes are literal text, not patterns.
  EXPECT_TRUE(Events(*store_, "job_").empty());
  EXPECT_TRUE(Events(*store_, "%").empty());
}

TEST_P(StoreConformanceTest, ConcurrentAppliesAreAllAcknowledgedAndRecovered) {
  constexpr int kThreads = 64;
  constexpr int kPerThread = 25;
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int64_t id = 1 + t * kPerThread + i;
        Status st = ApplyAndWait(*store_, {InsertJob{SampleJob(id, 1)},
                                           AppendEvent{Ev(id, "job/" + std::to_string(id))}});
        (st.ok() ? ok : failed)++;
        // Every third thread also sends a bad batch: it must fail alone.
        if (t % 3 == 0) {
          Status bad = ApplyAndWait(*store_, {InsertJob{SampleJob(1'000'000 + id, 1)},
                                              UpdateJob{-1 - id, JobState::kFailed, "", 0}});
          if (bad.ok()) failed++;
          Status missing =
              ApplyAndWait(*store_, {InsertJob{SampleJob(2'000'000 + id, 1)},
                                     UpdateJob{3'000'000 + id, JobState::kFailed, "", 0}});
          if (missing.code() != StatusCode::kNotFound) failed++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  EXPECT_EQ(failed.load(), 0);
  RecoveredState got = MustRecover(*store_);
  ASSERT_EQ(got.jobs.size(), static_cast<size_t>(kThreads * kPerThread));
  for (size_t i = 0; i < got.jobs.size(); ++i) {
    ASSERT_EQ(got.jobs[i].id, static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(got.max_job_id, kThreads * kPerThread);
  EXPECT_EQ(Events(*store_, "job/").size(), static_cast<size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace gpupool::testing
