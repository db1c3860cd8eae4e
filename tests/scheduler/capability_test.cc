// Issue 24 in the core: a pool's required capabilities. Fractional work on a pool whose only node
// cannot enforce them waits with MISSING_CAPABILITY naming what is missing, runs once a node that
// enforces them registers, and whole GPUs are not held to it; the requirement survives a restart.
#include <gtest/gtest.h>

#include <memory>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

Status Register(CoreHarness& h, const std::string& node,
                std::vector<NodeCapabilityRecord> capabilities) {
  AgentRegistration reg = testing::SimulatedH100s(node, "slices", 1);
  reg.capabilities = std::move(capabilities);
  h.agents.connected.insert(node);
  return h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); }).status();
}

Status CreateSlicesPool(CoreHarness& h) {
  PoolRecord p;
  p.name = "slices";
  p.placement_strategy = "first-fit";
  p.required_capabilities = {"compute_share", "sandbox", "vram_cap"};
  return h.Sync<PoolView>([&](auto cb) { h.core->CreatePool(p, cb); }).status();
}

TEST(PoolCapabilityTest, FractionalWorkWaitsForANodeThatEnforcesThePoolsRequirements) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  auto h = std::make_unique<CoreHarness>(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(CreateSlicesPool(*h).ok());
  // The node enforces the sandbox, but nothing holds a task to its VRAM or compute share; it
  // reports vram_cap, but not enforced.
  ASSERT_TRUE(Register(*h, "bare",
                       {{"sandbox", true, "cgroups v2"},
                        {"vram_cap", false, "no interposer"},
                        {"xid_events", true, "nvml"}})
                  .ok());
  auto job = h->Submit(CoreHarness::Fractional("slices", 100'000, 10'240));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  TaskRecord t = h->Task(job->id);
  EXPECT_EQ(t.state, TaskState::kPending);
  EXPECT_EQ(t.pending.code, PendingCode::kMissingCapability);
  EXPECT_EQ(t.pending.binding, "vram_cap, compute_share");
  EXPECT_EQ(t.reason,
            "waiting for a node that enforces vram_cap, compute_share (pool slices requires it "
            "for shared work)");
  // A whole GPU needs no slice enforcement: it runs on the same node.
  auto whole = h->Submit(CoreHarness::Whole("slices", 1));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(h->Task(whole->id).state, TaskState::kScheduled);
  EXPECT_EQ(h->Task(whole->id).node, "bare");
  h->Report("bare", whole->id, 0, TaskState::kSucceeded);
  EXPECT_EQ(h->Task(job->id).state, TaskState::kPending);  // the GPU is free, still not here

  // The requirement is stored with the pool: after a restart the task still waits.
  h.reset();
  h = std::make_unique<CoreHarness>(SchedulerOptions::Defaults(), db);
  EXPECT_EQ(h->core->GetPool("slices")->pool.required_capabilities,
            (std::vector<std::string>{"compute_share", "sandbox", "vram_cap"}));
  ASSERT_TRUE(Register(*h, "bare", {{"sandbox", true, "cgroups v2"}}).ok());
  EXPECT_EQ(h->Task(job->id).pending.code, PendingCode::kMissingCapability);

  // An enforcing node joins: the task is placed there.
  ASSERT_TRUE(Register(*h, "enforcing",
                       {{"sandbox", true, "cgroups v2"},
                        {"vram_cap", true, "interposer"},
                        {"compute_share", true, "interposer"}})
                  .ok());
  t = h->Task(job->id);
  EXPECT_EQ(t.state, TaskState::kScheduled);
  EXPECT_EQ(t.node, "enforcing");
}

// The node that could not enforce gains the capability (its agent upgraded and registered
// again): the waiting task runs there.
TEST(PoolCapabilityTest, ANodeThatGainsTheCapabilityTakesTheWaitingWork) {
  CoreHarness h;
  ASSERT_TRUE(CreateSlicesPool(h).ok());
  ASSERT_TRUE(Register(h, "n1", {{"sandbox", true, "cgroups v2"}}).ok());
  auto job = h.Submit(CoreHarness::Fractional("slices", 100'000, 10'240));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(h.Task(job->id).pending.code, PendingCode::kMissingCapability);
  ASSERT_TRUE(Register(h, "n1",
                       {{"sandbox", true, "cgroups v2"},
                        {"vram_cap", true, "interposer"},
                        {"compute_share", true, "interposer"}})
                  .ok());
  EXPECT_EQ(h.Task(job->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(job->id).node, "n1");
}

}  // namespace
}  // namespace gpupool
