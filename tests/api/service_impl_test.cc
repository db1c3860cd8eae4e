// ServiceImpl against the real stack: the Scheduler, MemoryStore, AgentHub as gateway.
#include "api/service_impl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/api/service_harness.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using testing::Collector;
using ::testing::HasSubstr;
using testing::ServiceHarness;
using testing::Tenant;

TEST(ServiceImpl, SubmitGetListPaginateCancel) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto [s, resp] = h.Submit(ServiceHarness::Job("acme/research/alice", "gpu-a"));
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(resp.job().id(), resp.job_id());
    EXPECT_EQ(resp.job().state(), v1::JOB_STATE_PENDING);
    ids.push_back(resp.job_id());
  }
  auto [gs, job] = h.Get(ids[2]);
  ASSERT_TRUE(gs.ok()) << gs.ToString();
  EXPECT_EQ(job.spec().tenant(), "acme/research/alice");
  ASSERT_EQ(job.tasks_size(), 1);
  EXPECT_EQ(job.tasks(0).id(), ids[2] + ".0");
  EXPECT_EQ(job.tasks(0).state(), v1::TASK_STATE_PENDING);
  EXPECT_TRUE(job.has_submit_time());

  // Pages of 2: 2 + 2 + 1, the last without a token.
  std::vector<std::string> seen;
  v1::ListJobsRequest list;
  list.set_page_size(2);
  for (int page = 0; page < 3; ++page) {
    auto [ls, resp] = h.Call(&ApiService::ListJobs, list);
    ASSERT_TRUE(ls.ok()) << ls.ToString();
    for (const v1::Job& j : resp.jobs()) seen.push_back(j.id());
    EXPECT_EQ(resp.jobs_size(), page < 2 ? 2 : 1);
    EXPECT_EQ(resp.next_page_token().empty(), page == 2);
    list.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ(seen, ids);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(ids[0]);
  cancel.set_reason("not needed");
  auto [cs, cancelled] = h.Call(&ApiService::CancelJob, cancel);
  ASSERT_TRUE(cs.ok()) << cs.ToString();
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);

  v1::ListJobsRequest by_state;
  by_state.set_state(v1::JOB_STATE_CANCELLED);
  auto [bs, only] = h.Call(&ApiService::ListJobs, by_state);
  ASSERT_TRUE(bs.ok());
  ASSERT_EQ(only.jobs_size(), 1);
  EXPECT_EQ(only.jobs(0).id(), ids[0]);
}

// The submitter is recorded and shown; a member cancels only what it submitted (issue 16).
// A pool created with no requirement named gets the default (vram_cap, compute_share, sandbox):
// a fractional job on it waits with MISSING_CAPABILITY while its only node enforces nothing,
// and runs once the pool is told "none".
TEST(ServiceImpl, ANewPoolRequiresSliceEnforcementAndTheSandboxUnlessToldOtherwise) {
  ServiceHarness h;
  v1::CreatePoolRequest create;
  create.mutable_pool()->set_name("slices");
  auto [cs, created] = h.Call(&ApiService::CreatePool, create);
  ASSERT_TRUE(cs.ok()) << cs.ToString();
  EXPECT_THAT(created.required_capabilities(),
              ::testing::ElementsAre("compute_share", "sandbox", "vram_cap"));
  ASSERT_TRUE(h.RegisterNode("n1", "slices").ok());
  auto [s, sub] = h.Submit(ServiceHarness::Job("acme", "slices"));
  ASSERT_TRUE(s.ok()) << s.ToString();
  v1::Job waiting = h.WaitJob(sub.job_id(), [](const v1::Job& j) {
    return j.tasks(0).pending().code() == v1::PendingReason::MISSING_CAPABILITY;
  });
  EXPECT_EQ(waiting.tasks(0).pending().binding(), "vram_cap, compute_share, sandbox");
  EXPECT_TRUE(waiting.tasks(0).node().empty());

  v1::UpdatePoolRequest update;
  update.mutable_pool()->set_name("slices");
  update.mutable_pool()->add_required_capabilities("none");
  update.mutable_update_mask()->add_paths("required_capabilities");
  auto [us, updated] = h.Call(&ApiService::UpdatePool, update);
  ASSERT_TRUE(us.ok()) << us.ToString();
  EXPECT_TRUE(updated.required_capabilities().empty());
  v1::Job placed =
      h.WaitJob(sub.job_id(), [](const v1::Job& j) { return !j.tasks(0).node().empty(); });
  EXPECT_EQ(placed.tasks(0).node(), "n1");
}

TEST(ServiceImpl, AMemberCancelsOnlyTheJobsItSubmitted) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  const CallContext alice = CallContext::Of("key:a11ce", "acme", Role::kMember);
  const CallContext bob = CallContext::Of("key:b0b", "acme", Role::kMember);
  auto [s, resp] = h.Submit(ServiceHarness::Job("acme/research", "gpu-a"), alice);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(resp.job().submitted_by(), "key:a11ce");
  EXPECT_EQ(h.Get(resp.job_id(), bob).second.submitted_by(), "key:a11ce");

  v1::CancelJobRequest cancel;
  cancel.set_job_id(resp.job_id());
  Status denied = h.Call(&ApiService::CancelJob, cancel, bob).first;
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "job " + resp.job_id() +
                                  " was submitted by 'key:a11ce', not by this caller ('key:b0b'): "
                                  "a member may cancel only the jobs it submitted; ask a "
                                  "tenant-admin of 'acme/research'");
  EXPECT_EQ(h.Get(resp.job_id()).second.state(), v1::JOB_STATE_PENDING);  // nothing changed
  EXPECT_TRUE(h.Call(&ApiService::CancelJob, cancel, alice).first.ok());

  // A tenant-admin cancels any job of its subtree, a job submitted by an admin included.
  auto [s2, by_admin] = h.Submit(ServiceHarness::Job("acme/research", "gpu-a"));
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(by_admin.job().submitted_by(), "test-admin");
  cancel.set_job_id(by_admin.job_id());
  EXPECT_EQ(h.Call(&ApiService::CancelJob, cancel, alice).first.code(),
            StatusCode::kPermissionDenied);
  const CallContext lead = CallContext::Of("key:1ead", "acme", Role::kTenantAdmin);
  EXPECT_TRUE(h.Call(&ApiService::CancelJob, cancel, lead).first.ok());
}

TEST(ServiceImpl, BadInputIsRejectedAndNothingIsStored) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  v1::SubmitJobRequest bad = ServiceHarness::Job("acme", "gpu-a");
  bad.mutable_spec()->set_task_count(0);
  auto [s, resp] = h.Submit(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.task_count: must be between 1 and 10000, got 0");

  bad = ServiceHarness::Job("acme", "gpu-a", 1000, -5);
  EXPECT_EQ(h.Submit(bad).first.message(),
            "spec.template.resources.fractional.vram_mib: must be > 0, got -5");
  EXPECT_EQ(h.Submit(v1::SubmitJobRequest{}).first.message(), "spec: must be set");

  // Semantic errors come from the core.
  EXPECT_EQ(h.Submit(ServiceHarness::Job("acme", "nope")).first.code(), StatusCode::kNotFound);

  Result<RecoveredState> stored = h.store.Recover();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->jobs.empty());
  auto [ls, list] = h.Call(&ApiService::ListJobs, v1::ListJobsRequest{});
  EXPECT_EQ(list.jobs_size(), 0);

  v1::ListJobsRequest token;
  token.set_page_token("not-a-token");
  EXPECT_EQ(h.Call(&ApiService::ListJobs, token).first.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Get("abc").first.message(), "job_id: must be a positive integer, got 'abc'");
  EXPECT_EQ(h.Get("99").first.code(), StatusCode::kNotFound);
}

TEST(ServiceImpl, TenantsSeeAndActOnlyWithinTheirSubtree) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  CallContext research = Tenant("acme/research");
  auto [s1, mine] = h.Submit(ServiceHarness::Job("acme/research/alice", "gpu-a"), research);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  auto [s2, other] = h.Submit(ServiceHarness::Job("acme/researchers", "gpu-a"));  // admin
  ASSERT_TRUE(s2.ok());

  Status denied = h.Submit(ServiceHarness::Job("acme/researchers", "gpu-a"), research).first;
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "spec.tenant: tenant 'acme/researchers' is not 'acme/research' or below it");

  EXPECT_TRUE(h.Get(mine.job_id(), research).first.ok());
  EXPECT_EQ(h.Get(other.job_id(), research).first.code(), StatusCode::kPermissionDenied);

  auto [ls, list] = h.Call(&ApiService::ListJobs, v1::ListJobsRequest{}, research);
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).id(), mine.job_id());
  v1::ListJobsRequest others;
  others.set_tenant("acme");
  EXPECT_EQ(h.Call(&ApiService::ListJobs, others, research).first.code(),
            StatusCode::kPermissionDenied);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(other.job_id());
  EXPECT_EQ(h.Call(&ApiService::CancelJob, cancel, research).first.code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(h.Get(other.job_id()).second.state(), v1::JOB_STATE_PENDING);

  // A caller without a tenant sees nothing.
  EXPECT_EQ(h.Get(mine.job_id(), Tenant("")).first.code(), StatusCode::kPermissionDenied);
}

// Issue 16: a tenant submitted at `system` and preempted another tenant's running task.
TEST(ServiceImpl, TenantsSubmitOnlyAtTheirAllowedPriorityClasses) {
  const SchedulerOptions scheduler = SchedulerOptions::Defaults();
  // Default: the preemptible classes up to the default one (low, normal).
  Result<PriorityAccess> access = PriorityAccess::Create(scheduler);
  ASSERT_TRUE(access.ok());
  ASSERT_TRUE(access->Add("ops", {"normal", "system"}).ok());
  ServiceOptions options;
  options.priority_access = &*access;
  ServiceHarness h({}, options);
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());

  v1::SubmitJobRequest req = ServiceHarness::Job("acme/alice", "gpu-a");
  req.mutable_spec()->set_priority_class("system");
  Status denied = h.Submit(req, Tenant("acme")).first;
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "spec.priority_class: tenant 'acme/alice' may not submit at priority class 'system' "
            "(allowed: low, normal)");
  auto [ls, list] = h.Call(&ApiService::ListJobs, v1::ListJobsRequest{});
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(list.jobs_size(), 0);  // nothing stored

  // Issue 30: `high` preempts other tenants' normal work, so it is granted, not a default.
  req.mutable_spec()->set_priority_class("high");
  EXPECT_EQ(h.Submit(req, Tenant("acme")).first.code(), StatusCode::kPermissionDenied);
  req.mutable_spec()->set_priority_class("normal");
  EXPECT_TRUE(h.Submit(req, Tenant("acme")).first.ok());
  v1::SubmitJobRequest ops = ServiceHarness::Job("ops/oncall", "gpu-a");
  ops.mutable_spec()->set_priority_class("system");
  EXPECT_TRUE(h.Submit(ops, Tenant("ops/oncall")).first.ok());  // inherited from ops
  ops.mutable_spec()->set_priority_class("low");
  EXPECT_EQ(h.Submit(ops, Tenant("ops")).first.code(), StatusCode::kPermissionDenied);
  req.mutable_spec()->set_priority_class("system");
  EXPECT_TRUE(h.Submit(req).first.ok());  // an admin may use any class
}

TEST(ServiceImpl, SubmissionsAreRateLimitedPerOrganisation) {
  int64_t now_us = 0;  // the limiter's clock, moved by hand
  RateLimiter limiter({.rate_per_second = 2, .burst = 3}, [&] { return now_us; });
  ServiceOptions options;
  options.submit_limiter = &limiter;
  ServiceHarness h({}, options);
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  // A burst of 3, shared by every path under the organisation.
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("acme/a", "gpu-a"), Tenant("acme")).first.ok());
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("acme/b", "gpu-a"), Tenant("acme")).first.ok());
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("acme/c/d", "gpu-a"), Tenant("acme")).first.ok());
  Status s = h.Submit(ServiceHarness::Job("acme/e", "gpu-a"), Tenant("acme")).first;
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "tenant 'acme': more than 2 submissions per second (burst 3); retry in 0.5 s");
  // Another organisation and admins are not held back by acme's flood.
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("globex/x", "gpu-a"), Tenant("globex")).first.ok());
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("acme/e", "gpu-a")).first.ok());
  // Half a second later one token is back.
  now_us += 500'000;
  EXPECT_TRUE(h.Submit(ServiceHarness::Job("acme/e", "gpu-a"), Tenant("acme")).first.ok());
  EXPECT_EQ(h.Submit(ServiceHarness::Job("acme/e", "gpu-a"), Tenant("acme")).first.code(),
            StatusCode::kResourceExhausted);
}

TEST(ServiceImpl, AdminMethodsRequireAnAdmin) {
  ServiceHarness h;
  CallContext user = Tenant("acme");
  v1::CreatePoolRequest create;
  create.mutable_pool()->set_name("p");
  Status s = h.Call(&ApiService::CreatePool, create, user).first;
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "create pool: requires an admin; 'acme' is not one");
  v1::DeletePoolRequest del;
  del.set_name("p");
  EXPECT_EQ(h.Call(&ApiService::DeletePool, del, user).first.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(h.Call(&ApiService::ListNodes, v1::ListNodesRequest{}, user).first.code(),
            StatusCode::kPermissionDenied);
  v1::NodeActionRequest cordon;
  cordon.set_name("n1");
  EXPECT_EQ(h.Call(&ApiService::CordonNode, cordon, user).first.code(),
            StatusCode::kPermissionDenied);
  v1::ClearDeviceFaultRequest clear;
  clear.set_node("n1");
  clear.set_device("GPU-0");
  Status cs = h.Call(&ApiService::ClearDeviceFault, clear, user).first;
  EXPECT_EQ(cs.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cs.message(), "clear a device fault: requires an admin; 'acme' is not one");
  v1::SetDeviceSlotsRequest slots;
  slots.set_node("n1");
  slots.set_device("GPU-0");
  slots.set_slots(4);
  Status ss = h.Call(&ApiService::SetDeviceSlots, slots, user).first;
  EXPECT_EQ(ss.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ss.message(), "set a device's slots: requires an admin; 'acme' is not one");

  // Tenants see public pools and the private ones that allow them.
  ASSERT_TRUE(h.CreatePool("public").first.ok());
  ASSERT_TRUE(h.CreatePool("ours", v1::VISIBILITY_PRIVATE, {"acme"}).first.ok());
  ASSERT_TRUE(h.CreatePool("theirs", v1::VISIBILITY_PRIVATE, {"globex"}).first.ok());
  auto [ls, pools] = h.Call(&ApiService::ListPools, v1::ListPoolsRequest{}, Tenant("acme/x"));
  ASSERT_TRUE(ls.ok());
  std::vector<std::string> names;
  for (const v1::Pool& p : pools.pools()) names.push_back(p.name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ours", "public"}));
  v1::GetPoolRequest get;
  get.set_name("theirs");
  EXPECT_EQ(h.Call(&ApiService::GetPool, get, Tenant("acme/x")).first.code(),
            StatusCode::kPermissionDenied);
}

TEST(ServiceImpl, LearnedWorkloadIsShownToAdminsOnly) {
  // Three jobs of one shape submitted to a public pool: an admin sees the class the placement
  // learned from them; a tenant, who could otherwise read others' request mix, sees none.
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("shared").first.ok());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(
        h.Submit(ServiceHarness::Job("acme/research/alice", "shared", 250'000, 20'480)).first.ok());
  v1::GetPoolRequest get;
  get.set_name("shared");
  auto [as, admin] = h.Call(&ApiService::GetPool, get);
  ASSERT_TRUE(as.ok()) << as.ToString();
  EXPECT_EQ(admin.learned_tasks(), 3);
  ASSERT_GE(admin.learned_classes_size(), 1);
  const v1::LearnedClass& top = admin.learned_classes(0);
  EXPECT_FALSE(top.prior());
  EXPECT_EQ(top.shape().fractional().milli_tflops(), 250'000);
  EXPECT_EQ(top.shape().fractional().vram_mib(), 20'480);
  // 3 tasks (each class of the prior weighs 16/7 = 2.29) against the prior's 16 pseudo-tasks:
  // 3 / 19 of the weight (decay over 3 tasks moves it by < 1e-3).
  EXPECT_NEAR(top.share(), 3.0 / 19, 1e-3);

  auto [ts, tenant] = h.Call(&ApiService::GetPool, get, Tenant("acme/research/alice"));
  ASSERT_TRUE(ts.ok()) << ts.ToString();
  EXPECT_EQ(tenant.learned_classes_size(), 0);
  EXPECT_EQ(tenant.learned_tasks(), 0);
  auto [ls, list] =
      h.Call(&ApiService::ListPools, v1::ListPoolsRequest{}, Tenant("acme/research/alice"));
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(list.pools_size(), 1);
  EXPECT_EQ(list.pools(0).learned_classes_size(), 0);
}

TEST(ServiceImpl, PoolLifecycleAndValidation) {
  ServiceHarness h;
  v1::CreatePoolRequest create;
  v1::Pool* p = create.mutable_pool();
  p->set_name("gpu-a");
  p->set_placement_strategy("best-fit");
  p->set_compute_overcommit(2.0);
  auto [cs, created] = h.Call(&ApiService::CreatePool, create);
  ASSERT_TRUE(cs.ok()) << cs.ToString();
  EXPECT_EQ(created.compute_overcommit(), 2.0);
  EXPECT_EQ(created.memory_overcommit(), 1.0);
  EXPECT_EQ(created.visibility(), v1::VISIBILITY_PUBLIC);
  EXPECT_TRUE(created.has_capacity());

  v1::UpdatePoolRequest update;
  update.mutable_pool()->set_name("gpu-a");
  update.mutable_pool()->set_memory_overcommit(1.5);
  update.mutable_pool()->set_placement_strategy("ignored-by-mask");
  update.mutable_update_mask()->add_paths("memory_overcommit");
  auto [us, updated] = h.Call(&ApiService::UpdatePool, update);
  ASSERT_TRUE(us.ok()) << us.ToString();
  EXPECT_EQ(updated.memory_overcommit(), 1.5);
  EXPECT_EQ(updated.compute_overcommit(), 2.0);
  EXPECT_EQ(updated.placement_strategy(), "best-fit");

  v1::CreatePoolRequest bad = create;
  bad.mutable_pool()->set_name("gpu-b");
  bad.mutable_pool()->set_placement_strategy("tetris");
  Status s = h.Call(&ApiService::CreatePool, bad).first;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("pool.placement_strategy"));
  v1::GetPoolRequest get;
  get.set_name("gpu-b");
  EXPECT_EQ(h.Call(&ApiService::GetPool, get).first.code(), StatusCode::kNotFound);

  v1::DeletePoolRequest del;
  del.set_name("gpu-a");
  ASSERT_TRUE(h.Call(&ApiService::DeletePool, del).first.ok());
  get.set_name("gpu-a");
  EXPECT_EQ(h.Call(&ApiService::GetPool, get).first.code(), StatusCode::kNotFound);
}

TEST(ServiceImpl, WatchJobStreamsUntilTheJobEnds) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  auto [s, sub] = h.Submit(ServiceHarness::Job("acme", "gpu-a"));
  ASSERT_TRUE(s.ok());
  Collector<v1::JobEvent> events;
  v1::WatchJobRequest req;
  req.set_job_id(sub.job_id());
  Cancel stop = h.service->WatchJob(Admin(), req, events.OnItem(), events.OnDone());
  ASSERT_TRUE(events.WaitItems(1));
  EXPECT_EQ(events.items()[0].job().state(), v1::JOB_STATE_PENDING);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(sub.job_id());
  ASSERT_TRUE(h.Call(&ApiService::CancelJob, cancel).first.ok());
  EXPECT_TRUE(events.WaitDone().ok());
  EXPECT_EQ(events.items().back().job().state(), v1::JOB_STATE_CANCELLED);
  stop();  // after done: harmless

  // Not yours, not found, malformed.
  Collector<v1::JobEvent> denied;
  h.service->WatchJob(Tenant("globex"), req, denied.OnItem(), denied.OnDone());
  EXPECT_EQ(denied.WaitDone().code(), StatusCode::kPermissionDenied);
  Collector<v1::JobEvent> missing;
  req.set_job_id("404");
  h.service->WatchJob(Admin(), req, missing.OnItem(), missing.OnDone());
  EXPECT_EQ(missing.WaitDone().code(), StatusCode::kNotFound);
  Collector<v1::JobEvent> bad;
  req.set_job_id("x");
  h.service->WatchJob(Admin(), req, bad.OnItem(), bad.OnDone());
  EXPECT_EQ(bad.WaitDone().code(), StatusCode::kInvalidArgument);
}

TEST(ServiceImpl, WatchCancelStopsCallbacks) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  auto [s, sub] = h.Submit(ServiceHarness::Job("acme", "gpu-a"));
  Collector<v1::JobEvent> events;
  v1::WatchJobRequest req;
  req.set_job_id(sub.job_id());
  Cancel stop = h.service->WatchJob(Admin(), req, events.OnItem(), events.OnDone());
  ASSERT_TRUE(events.WaitItems(1));
  stop();
  stop();
  v1::CancelJobRequest cancel;
  cancel.set_job_id(sub.job_id());
  ASSERT_TRUE(h.Call(&ApiService::CancelJob, cancel).first.ok());
  h.scheduler->Flush();  // let the core publish its change
  EXPECT_EQ(events.items().size(), 1u);
  EXPECT_FALSE(events.done());
}

TEST(ServiceImpl, TaskLogsNeedAPlacedTaskAndAConnectedNode) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  auto [s, sub] = h.Submit(ServiceHarness::Job("acme", "gpu-a"));
  ASSERT_TRUE(s.ok());
  v1::GetTaskLogsRequest req;
  req.set_task_id(sub.job_id() + ".0");
  Collector<v1::TaskLogChunk> pending;
  h.service->GetTaskLogs(Admin(), req, pending.OnItem(), pending.OnDone());
  EXPECT_EQ(pending.WaitDone().code(), StatusCode::kFailedPrecondition);

  // A node registered straight with the core, with no agent stream behind it.
  ASSERT_TRUE(h.RegisterNode("n1", "gpu-a").ok());
  v1::Job job =
      h.WaitJob(sub.job_id(), [](const v1::Job& j) { return !j.tasks(0).node().empty(); });
  ASSERT_EQ(job.tasks(0).node(), "n1");

  Collector<v1::TaskLogChunk> offline;
  h.service->GetTaskLogs(Admin(), req, offline.OnItem(), offline.OnDone());
  Status st = offline.WaitDone();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "node n1 is not connected");

  Collector<v1::TaskLogChunk> denied;
  h.service->GetTaskLogs(Tenant("globex"), req, denied.OnItem(), denied.OnDone());
  EXPECT_EQ(denied.WaitDone().code(), StatusCode::kPermissionDenied);

  Collector<v1::TaskLogChunk> malformed;
  req.set_task_id("7");
  h.service->GetTaskLogs(Admin(), req, malformed.OnItem(), malformed.OnDone());
  EXPECT_EQ(malformed.WaitDone().code(), StatusCode::kInvalidArgument);
}

TEST(ServiceImpl, ReadyReportsRecoveryAndTheStore) {
  Status health = Status::Ok();
  ServiceOptions options;
  options.store_health = [&health] { return health; };
  ServiceHarness h({}, options);
  EXPECT_TRUE(h.service->Ready().ok());
  health = Status::Unavailable("connection refused");
  EXPECT_EQ(h.service->Ready(), Status::Unavailable("store: connection refused"));
  h.service->SetRecovered(false);
  EXPECT_EQ(h.service->Ready().code(), StatusCode::kUnavailable);
}

TEST(ServiceImpl, ListGpuModelsShowsTheCatalog) {
  ServiceHarness h;
  auto [s, resp] = h.Call(&ApiService::ListGpuModels, v1::ListGpuModelsRequest{}, Tenant("a"));
  ASSERT_TRUE(s.ok());
  ASSERT_GT(resp.models_size(), 10);
  bool h100 = false;
  for (const v1::GpuModel& m : resp.models()) {
    EXPECT_GT(m.vram_mib(), 0) << m.name();
    h100 |= m.name() == "H100-SXM";
  }
  EXPECT_TRUE(h100);
}

}  // namespace
}  // namespace gpupool::api
