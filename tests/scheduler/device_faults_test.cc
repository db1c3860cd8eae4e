// Issue 10 in the core: device faults (stored, kept through a restart, cleared by an admin), a
// task failed for a device fault requeued, node capabilities shown, and task usage kept.
#include "scheduler/device_faults.h"

#include <gtest/gtest.h>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

TEST(DeviceFaultBookTest, NewClearedAndRepeatedFaults) {
  DeviceFaultBook book;
  auto row = book.Report("n1", "GPU-0", "XID 79", 100, 5);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->since_us, 5);
  book.Put(*row);
  EXPECT_NE(book.Active("n1", "GPU-0"), nullptr);
  EXPECT_FALSE(book.Report("n1", "GPU-0", "XID 79", 100, 6).has_value());  // already held
  auto cleared = book.Clear("n1", "GPU-0", "root", 7);
  ASSERT_TRUE(cleared.ok());
  EXPECT_TRUE(cleared->cleared);
  book.Put(*cleared);
  EXPECT_EQ(book.Active("n1", "GPU-0"), nullptr);
  EXPECT_FALSE(book.Report("n1", "GPU-0", "XID 79", 100, 8).has_value());  // cleared, same id
  EXPECT_TRUE(book.Report("n1", "GPU-0", "XID 48", 200, 9).has_value());   // a new one
  Result<DeviceFaultRecord> none = book.Clear("n1", "GPU-1", "root", 10);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "device 'GPU-1' on node 'n1' has no fault to clear");
}

Result<NodeView> Clear(CoreHarness& h, const std::string& node, const std::string& device) {
  return h.Sync<NodeView>([&](auto cb) { h.core->ClearDeviceFault(node, device, "admin", cb); });
}

TEST(CoreDeviceFaultTest, AFaultIsStoredKeptAcrossARestartAndClearedByAnAdmin) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
    auto job = h.Submit(CoreHarness::Whole("gpu", 1));
    ASSERT_TRUE(job.ok());
    h.Report("n1", job->id, 0, TaskState::kRunning);

    // The agent fails the task for the fault and reports the fault in its heartbeat.
    TaskReport r;
    r.node = "n1";
    r.task_id = TaskId(job->id, 0);
    r.attempt = 0;
    r.state = TaskState::kFailed;
    r.exit_code = 137;
    r.reason = "device GPU-n1-0 failed: XID 79 (GPU has fallen off the bus)";
    r.device_fault = true;
    h.core->OnTaskReport(r);
    h.core->OnHeartbeat(
        "n1", {{"GPU-n1-0", true, {}, {"GPU-n1-0", "XID 79 (GPU has fallen off the bus)", 42}}});
    h.Drain();
    TaskRecord t = h.Task(job->id);
    EXPECT_EQ(t.attempt, 1);  // requeued, not failed
    EXPECT_EQ(t.state, TaskState::kPending);
    // Placed nowhere: the node's only GPU is out of service, so the one node lacks devices.
    EXPECT_EQ(t.pending.code, PendingCode::kNoCapacity) << t.reason;
    EXPECT_EQ(t.pending.nodes_by_reason,
              (std::vector<std::pair<std::string, int32_t>>{{"devices", 1}}))
        << t.reason;
    NodeView v = *h.core->GetNode("n1");
    ASSERT_EQ(v.devices.size(), 1u);
    EXPECT_FALSE(v.devices[0].device.healthy);
    ASSERT_TRUE(v.devices[0].fault.has_value());
    EXPECT_EQ(v.devices[0].fault->reason, "XID 79 (GPU has fallen off the bus)");
    auto stored = h.store->Recover();
    ASSERT_EQ(stored->device_faults.size(), 1u);
    EXPECT_EQ(stored->device_faults[0].fault_id, 42);
  }
  // A restarted core recovers the fault; the agent, restarted too, no longer reports it.
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  h.core->OnHeartbeat("n1", {{"GPU-n1-0", true, {}, {}}});
  h.Drain();
  EXPECT_FALSE(h.core->GetNode("n1")->devices[0].device.healthy);
  EXPECT_EQ(h.Task(1).state, TaskState::kPending);

  EXPECT_EQ(Clear(h, "n9", "GPU-n1-0").status().code(), StatusCode::kNotFound);
  Result<NodeView> cleared = Clear(h, "n1", "GPU-n1-0");
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_TRUE(cleared->devices[0].device.healthy);
  EXPECT_FALSE(cleared->devices[0].fault.has_value());
  EXPECT_EQ(h.Task(1).state, TaskState::kScheduled);  // placed again
  auto stored = h.store->Recover();
  ASSERT_EQ(stored->device_faults.size(), 1u);
  EXPECT_TRUE(stored->device_faults[0].cleared);
  EXPECT_EQ(stored->device_faults[0].cleared_by, "admin");
  // The same fault reported again by an agent that still remembers it changes nothing.
  h.core->OnHeartbeat("n1", {{"GPU-n1-0", true, {}, {"GPU-n1-0", "XID 79", 42}}});
  h.Drain();
  EXPECT_TRUE(h.core->GetNode("n1")->devices[0].device.healthy);
}

TEST(CoreDeviceFaultTest, CapabilitiesAreShownStoredAndUsageIsKept) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  AgentRegistration reg = testing::SimulatedH100s("n1", "gpu", 1);
  reg.capabilities = {{"memory", true, "memory.max"}, {"mps", false, "not managed"}};
  h.agents.connected.insert("n1");
  ASSERT_TRUE(h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); }).ok());
  NodeView v = *h.core->GetNode("n1");
  ASSERT_EQ(v.capabilities.size(), 2u);
  EXPECT_EQ(v.capabilities[1].name, "mps");
  EXPECT_FALSE(v.capabilities[1].enforced);

  auto job = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(job.ok());
  h.Report("n1", job->id, 0, TaskState::kRunning);
  TaskReport r;
  r.node = "n1";
  r.task_id = TaskId(job->id, 0);
  r.state = TaskState::kFailed;
  r.exit_code = 137;
  r.oom = true;
  r.usage = {1'500'000, 33'554'432, 1};
  h.core->OnTaskReport(r);
  h.Drain();
  EXPECT_EQ(h.Task(job->id).usage, (TaskUsageRecord{1'500'000, 33'554'432, 1}));
  EXPECT_EQ(h.store->Recover()->jobs[0].tasks[0].usage,
            (TaskUsageRecord{1'500'000, 33'554'432, 1}));

  // Capabilities are stored with the node: a restarted core (it takes over the store, so this
  // comes last) shows them before the agent registers again.
  EXPECT_EQ(h.store->Recover()->nodes[0].capabilities, reg.capabilities);
  CoreHarness restarted(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(restarted.core->GetNode("n1").ok());
  EXPECT_EQ(restarted.core->GetNode("n1")->capabilities, reg.capabilities);
}

}  // namespace
}  // namespace gpupool
