// Issue 27 end to end: dynamic MIG. A real gpupoold (embedded PostgreSQL) and a gpupool-agent
// on the simulated backend with one H100 in MIG mode laid out as seven 1g.10gb instances.
//  - A pool with the idle policy: two 3g.40gb jobs find no instance; the scheduler re-lays the
//    GPU out as 3g.40gb@0+3g.40gb@4, stored before the agent is asked; the agent re-partitions
//    and registers again, and both jobs run on the new instances.
//  - An admin's layout over REST: bad ones refused with the reason (400), a busy GPU refused, a
//    good one applied; audited.
//  - A restart in the middle of a re-layout: the agent is away when the layout is stored; the
//    daemon restarts; the agent comes back with the old layout and is asked again; the GPU ends
//    on the stored layout, never between the two.
#include <gtest/gtest.h>

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
