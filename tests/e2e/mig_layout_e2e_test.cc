// Issue 27 end to end: dynamic MIG. A real gpupoold (embedded PostgreSQL) and a gpupool-agent
// on the simulated backend with one H100 in MIG mode laid out as seven 1g.10gb instances.
//  - A pool with the idle policy: two 3g.40gb jobs find no instance; the scheduler re-lays the
//    GPU out as 3g.40gb@0+3g.40gb@4, stored before the agent is asked; the agent re-partitions
//    and registers again, and both jobs run on the new instances.
//  - An admin's layout over REST: bad ones refused with the reason (400), a busy GPU refused, a
//    good one applied; audited.
//  - `gpupoolctl whatif`'s replay (POST /v1/whatif) of that pool: its MIG GPU with its current
//    layout, its MIG jobs with their profiles, under its idle policy (re-laid out, placed) and
//    under a candidate with re-layout off (refused, as production would).
//  - A restart in the middle of a re-layout: the agent is away when the layout is stored; the
//    daemon restarts; the agent comes back with the old layout and is asked again; the GPU ends
//    on the stored layout, never between the two.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "gpupool/v1/whatif.pb.h"
#include "tests/e2e/mig_e2e_fixture.h"

namespace gpupool {
namespace {

using api::testing::HttpResult;
using api::testing::http::verb;

constexpr char kOnes[] = "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6";

class MigLayoutE2eTest : public testing::MigE2eFixture {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-mig-e2e");
    ASSERT_TRUE(dir.ok());
    StartAll(*dir);
  }
  void Configure(testing::AgentProcessOptions* o) override {
    o->gpus_yaml =
        "  - {model: H100-SXM, count: 1, mig: {\"0\": [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, "
        "1g.10gb, 1g.10gb, 1g.10gb]}}\n";
  }
  bool Runs(const std::string& id) {
    const v1::Job j = Job(id);
    return j.tasks_size() == 1 && (j.tasks(0).state() == v1::TASK_STATE_RUNNING ||
                                   j.tasks(0).state() == v1::TASK_STATE_SUCCEEDED);
  }
};

TEST_F(MigLayoutE2eTest, TheIdlePolicyReLaysOutTheGpuForWaitingWorkWhichThenRuns) {
  ASSERT_EQ(Gpu().layout(), kOnes);
  const std::string a = Submit("3g.40gb", "sleep 600");
  const std::string b = Submit("3g.40gb", "sleep 600");
  ASSERT_TRUE(testing::WaitFor([&] { return Runs(a) && Runs(b); }, std::chrono::seconds(60),
                               std::chrono::milliseconds(100)))
      << NodeJson();
  const v1::MigGpu g = Gpu();
  EXPECT_EQ(g.layout(), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(g.wanted_layout(), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(g.state(), "applied");
  EXPECT_EQ(g.set_by(), "scheduler");
  EXPECT_NE(g.reason().find("2 × 3g.40gb"), std::string::npos) << g.reason();
  // Each task holds one of the new instances.
  const v1::Job ja = Job(a), jb = Job(b);
  ASSERT_EQ(ja.tasks(0).allocations_size(), 1);
  ASSERT_EQ(jb.tasks(0).allocations_size(), 1);
  EXPECT_NE(ja.tasks(0).allocations(0).device_id(), jb.tasks(0).allocations(0).device_id());
  // The GPU is busy now: an admin's layout is refused with the reason, and nothing changes.
  HttpResult busy = SetLayout(kAdmin, "7g.80gb@0");
  EXPECT_EQ(busy.status, 400) << busy.body;
  EXPECT_NE(busy.body.find("running work"), std::string::npos) << busy.body;
  EXPECT_EQ(Gpu().layout(), "3g.40gb@0+3g.40gb@4");
}

TEST_F(MigLayoutE2eTest, AnAdminLayoutIsCheckedAppliedAndAudited) {
  HttpResult r = SetLayout(kAcme, "7g.80gb@0");
  EXPECT_EQ(r.status, 403) << r.body;
  r = SetLayout(kAdmin, "5g.50gb@0");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("'5g.50gb' is not a MIG profile of H100-SXM"), std::string::npos) << r.body;
  r = SetLayout(kAdmin, "4g.40gb@0+3g.40gb@2");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("may start only at memory slice {0,4}"), std::string::npos) << r.body;
  r = Rest(kAdmin, verb::post,
           "/v1/nodes/node-m/gpus/" + Node().devices(0).id() + ":set-mig-layout",
           R"({"layout": "7g.80gb@0"})");
  EXPECT_EQ(r.status, 400) << r.body;  // an instance, not its GPU
  EXPECT_NE(r.body.find("is a MIG instance"), std::string::npos) << r.body;
  EXPECT_EQ(Gpu().layout(), kOnes);

  r = SetLayout(kAdmin, "4g.40gb@0+2g.20gb@4+1g.10gb@6");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(testing::WaitFor([&] { return Applied(); }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)))
      << NodeJson();
  EXPECT_EQ(Gpu().layout(), "4g.40gb@0+2g.20gb@4+1g.10gb@6");
  EXPECT_EQ(Gpu().set_by(), "key token:ops");  // the static token named ops
  // The instances are the new ones, and run work.
  const std::string job = Submit("4g.40gb", "exit 0");
  ASSERT_TRUE(testing::WaitFor([&] { return Job(job).state() == v1::JOB_STATE_SUCCEEDED; },
                               std::chrono::seconds(60), std::chrono::milliseconds(100)));
  // Audited: who asked for which layout.
  const HttpResult audit = Rest(kAdmin, verb::get, "/v1/audit?verb=SetMigLayout");
  ASSERT_EQ(audit.status, 200) << audit.body;
  EXPECT_NE(audit.body.find("4g.40gb@0+2g.20gb@4+1g.10gb@6"), std::string::npos) << audit.body;
}

TEST_F(MigLayoutE2eTest, WhatIfReplaysTheMigPoolUnderItsPolicyAndACandidatesPolicy) {
  // Two 3g jobs run and end (the idle policy re-lays the GPU out for them); an admin then lays it
  // back out as seven 1g instances.
  const auto submitted = std::chrono::steady_clock::now();
  const std::string a = Submit("3g.40gb", "sleep 1");
  const std::string b = Submit("3g.40gb", "sleep 1");
  ASSERT_TRUE(testing::WaitFor([&] { return Ended(a) && Ended(b); }, std::chrono::seconds(60),
                               std::chrono::milliseconds(100)))
      << NodeJson();
  ASSERT_EQ(Job(a).state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(SetLayout(kAdmin, kOnes).status, 200);
  ASSERT_TRUE(testing::WaitFor([&] { return Applied() && Gpu().layout() == kOnes; },
                               std::chrono::seconds(30), std::chrono::milliseconds(100)))
      << NodeJson();

  // The replay starts from the GPU's layout now (seven 1g): under the pool's idle policy the
  // replayed scheduler re-lays it out and both jobs run; with re-layout off it cannot, and the
  // replayed core refuses both as gpupoold would. The replay ends at now, and a layout takes the
  // replay 8 s (TwinConfig::relayout_ms): the jobs must have arrived well before.
  std::this_thread::sleep_until(submitted + std::chrono::seconds(20));
  const HttpResult r =
      Rest(kAdmin, verb::post, "/v1/whatif",
           R"({"pool": "mig", "window": "10m", "change": {"migRelayout": "off"}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto w = testing::ParseJson<v1::CompareWhatIfResponse>(r.body);
  EXPECT_EQ(w.gpus(), 1);
  EXPECT_EQ(w.tasks(), 2);
  EXPECT_EQ(w.unmodelled(), 0);
  EXPECT_EQ(w.unmodelled_gpus(), 0);
  EXPECT_EQ(w.baseline().mig_relayout(), "idle");
  EXPECT_GE(w.baseline().mig_relayouts(), 1);
  EXPECT_EQ(w.baseline().rejected(), 0);
  int64_t arrived = 0, never_started = 0;
  for (const auto& [cls, wait] : w.baseline().wait_by_class()) {
    arrived += wait.count();
    never_started += wait.never_started();
  }
  EXPECT_EQ(arrived, 2) << r.body;
  EXPECT_EQ(never_started, 0) << r.body;
  EXPECT_EQ(w.candidate().mig_relayout(), "off");
  EXPECT_EQ(w.candidate().mig_relayouts(), 0);
  EXPECT_EQ(w.candidate().rejected(), 2) << r.body;
  // Production is untouched: the GPU keeps the admin's layout.
  EXPECT_EQ(Gpu().layout(), kOnes);

  const HttpResult bad = Rest(kAdmin, verb::post, "/v1/whatif",
                              R"({"pool": "mig", "change": {"migRelayout": "sometimes"}})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("change.mig_relayout: must be off, idle or drain"), std::string::npos)
      << bad.body;
}

TEST_F(MigLayoutE2eTest, ADaemonRestartMidRelayoutEndsOnTheStoredLayout) {
  const std::string gpu = Gpu().id();
  StopAgent();  // the node goes away before the layout reaches it
  HttpResult r = SetLayout(kAdmin, "7g.80gb@0");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Gpu().state(), "applying");
  ASSERT_EQ(daemon_->Stop(), 0);
  ASSERT_TRUE(daemon_->Restart().ok());
  EXPECT_EQ(Gpu().state(), "applying");  // stored, so it outlives the daemon
  StartAgent();  // comes back with the old layout and no outcome: asked again
  ASSERT_TRUE(testing::WaitFor([&] { return Applied(); }, std::chrono::seconds(30),
                               std::chrono::milliseconds(100)))
      << NodeJson();
  EXPECT_EQ(Gpu().id(), gpu);
  EXPECT_EQ(Gpu().layout(), "7g.80gb@0");
  const std::string job = Submit("7g.80gb", "exit 0");
  ASSERT_TRUE(testing::WaitFor([&] { return Job(job).state() == v1::JOB_STATE_SUCCEEDED; },
                               std::chrono::seconds(60), std::chrono::milliseconds(100)));
}

}  // namespace
}  // namespace gpupool
