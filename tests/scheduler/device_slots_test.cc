// Issue 27 in the core: time-slicing set per device. An admin cuts one idle GPU of a fractional
// pool into slots; shares land there one slot each (held to the slot's share), whole GPUs keep
// to the unsliced one, and the count is stored before placement sees it, kept across a restart
// and a re-registration, and refused with the reason for a busy device, a node that cannot
// enforce shared work, or a store that did not take it.
#include "scheduler/device_slots.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

Result<NodeView> SetSlots(CoreHarness& h, const std::string& node, const std::string& device,
                          int32_t slots) {
  return h.Sync<NodeView>(
      [&](auto cb) { h.core->SetDeviceSlots(node, device, slots, "key admin-1", cb); });
}

// A copy: the view is often a temporary.
DeviceView DeviceOf(const Result<NodeView>& v, const std::string& id) {
  if (v.ok())
    for (const DeviceView& d : v->devices)
      if (d.device.id == id) return d;
  ADD_FAILURE() << "no device " << id;
  return DeviceView{};
}

TEST(DeviceSlotsBookTest, SetReplacedAndClearedPerDevice) {
  DeviceSlotsBook book;
  book.Load({{"n1", "GPU-0", 4, "a", 1}, {"n1", "GPU-1", 2, "a", 1}});
  EXPECT_EQ(book.Slots("n1", "GPU-0"), 4);
  EXPECT_EQ(book.Slots("n2", "GPU-0"), 0);
  book.Put({"n1", "GPU-0", 0, "a", 2});
  EXPECT_EQ(book.Slots("n1", "GPU-0"), 0);
  EXPECT_EQ(book.Find("n1", "GPU-0"), nullptr);
  EXPECT_EQ(book.Slots("n1", "GPU-1"), 2);
}

TEST(CoreDeviceSlotsTest, SharesTakeSlotsOfTheSlicedGpuAndWholeGpusTheOther) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
    Result<NodeView> v = SetSlots(h, "n1", "GPU-n1-1", 4);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(DeviceOf(v, "GPU-n1-1").slots, 4);
    EXPECT_EQ(DeviceOf(v, "GPU-n1-0").slots, 0);

    auto whole = h.Submit(CoreHarness::Whole("gpu", 1));
    ASSERT_TRUE(whole.ok());
    ASSERT_EQ(h.Task(whole->id).allocations.size(), 1u);
    EXPECT_EQ(h.Task(whole->id).allocations[0].device_id, "GPU-n1-0");
    for (int i = 0; i < 4; ++i) {
      auto share = h.Submit(CoreHarness::Fractional("gpu", 100'000, 10'240));
      ASSERT_TRUE(share.ok());
      TaskRecord t = h.Task(share->id);
      ASSERT_EQ(t.state, TaskState::kScheduled) << i << ": " << t.reason;
      // One slot of a 989 TFLOPS / 80 GiB GPU cut in four.
      EXPECT_EQ(t.allocations[0], (Allocation{"GPU-n1-1", Resources{247'250, 20'480}, 1, false}));
    }
    auto fifth = h.Submit(CoreHarness::Fractional("gpu", 100'000, 10'240));
    ASSERT_TRUE(fifth.ok());
    EXPECT_EQ(h.Task(fifth->id).state, TaskState::kPending);
    EXPECT_EQ(DeviceOf(h.core->GetNode("n1"), "GPU-n1-1").slots_used, 4);
    // A share larger than one slot never lands on it.
    auto big = h.Submit(CoreHarness::Fractional("gpu", 100'000, 30'720));
    ASSERT_TRUE(big.ok());
    EXPECT_EQ(h.Task(big->id).state, TaskState::kPending);

    auto stored = h.store->Recover();
    ASSERT_EQ(stored->device_slots.size(), 1u);
    EXPECT_EQ(stored->device_slots[0].slots, 4);
    EXPECT_EQ(stored->device_slots[0].set_by, "key admin-1");
    auto events = h.store->ListEvents("node/n1/GPU-n1-1", 0);
    ASSERT_TRUE(events.ok());
    ASSERT_EQ(events->size(), 1u);
    EXPECT_EQ((*events)[0].kind, "device.slots");
    EXPECT_EQ((*events)[0].message, "time-sliced into 4 slots by key admin-1");
  }
  // A restart and the agent's re-registration keep the count, and the running slots.
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.Reconnect("n1", "gpu", 2).ok());
  const DeviceView d = DeviceOf(h.core->GetNode("n1"), "GPU-n1-1");
  EXPECT_EQ(d.slots, 4);
  EXPECT_EQ(d.slots_used, 4);
}

TEST(CoreDeviceSlotsTest, RefusedWithTheReasonAndTheDeviceKeepsItsCount) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n1", "gpu", 2).ok());
  auto whole = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(h.Task(whole->id).allocations[0].device_id, "GPU-n1-0");

  Result<NodeView> busy = SetSlots(h, "n1", "GPU-n1-0", 2);
  EXPECT_EQ(busy.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(busy.status().message(),
            "device 'GPU-n1-0' on node 'n1' holds running work; its slots change only while it "
            "is idle (drain it first)");
  EXPECT_EQ(SetSlots(h, "n9", "GPU-n1-0", 2).status().message(), "node 'n9' not found");
  EXPECT_EQ(SetSlots(h, "n1", "GPU-x", 2).status().message(), "node 'n1': no device 'GPU-x'");
  Result<NodeView> many = SetSlots(h, "n1", "GPU-n1-1", 65);
  EXPECT_EQ(many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(many.status().message(), "slots: 65 is outside 0..64");

  // A store that does not take the row: the device keeps its count and stays in service.
  h.faults.refuse = [](const std::vector<Mutation>& batch) {
    return std::holds_alternative<SetDeviceSlots>(batch[0]);
  };
  Result<NodeView> lost = SetSlots(h, "n1", "GPU-n1-1", 2);
  EXPECT_FALSE(lost.ok());
  h.faults.refuse = nullptr;
  const DeviceView d = DeviceOf(h.core->GetNode("n1"), "GPU-n1-1");
  EXPECT_EQ(d.slots, 0);
  EXPECT_TRUE(d.device.healthy);
  auto next = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(h.Task(next->id).allocations[0].device_id, "GPU-n1-1");
}

TEST(CoreDeviceSlotsTest, TheAgentsConfigGivesTheDefaultAndAnAdminOverridesIt) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  AgentRegistration reg = testing::SimulatedH100s("n1", "gpu", 2);
  reg.node.devices[1].time_slice_slots = 2;  // `time_slicing: {"1": 2}` in its config
  h.agents.connected.insert("n1");
  ASSERT_TRUE(h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); }).ok());
  EXPECT_EQ(DeviceOf(h.core->GetNode("n1"), "GPU-n1-1").slots, 2);
  ASSERT_TRUE(SetSlots(h, "n1", "GPU-n1-1", 8).ok());
  EXPECT_EQ(DeviceOf(h.core->GetNode("n1"), "GPU-n1-1").slots, 8);
  // The agent re-registers with its config's count: the admin's stays.
  ASSERT_TRUE(h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); }).ok());
  EXPECT_EQ(DeviceOf(h.core->GetNode("n1"), "GPU-n1-1").slots, 8);
  // 0 removes the override: back to the config's count.
  ASSERT_TRUE(SetSlots(h, "n1", "GPU-n1-1", 0).ok());
  EXPECT_EQ(DeviceOf(h.core->GetNode("n1"), "GPU-n1-1").slots, 2);
}

TEST(CoreDeviceSlotsTest, ANodeThatCannotEnforceThePoolsSharedWorkCannotBeSliced) {
  CoreHarness h;
  PoolRecord p;
  p.name = "slices";
  p.placement_strategy = "first-fit";
  p.required_capabilities = {"vram_cap"};
  ASSERT_TRUE(h.Sync<PoolView>([&](auto cb) { h.core->CreatePool(p, cb); }).ok());
  ASSERT_TRUE(h.Register("bare", "slices", 1).ok());  // reports no capabilities
  Result<NodeView> v = SetSlots(h, "bare", "GPU-bare-0", 2);
  EXPECT_EQ(v.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.status().message(),
            "node 'bare' cannot enforce vram_cap, which pool 'slices' requires of shared work; "
            "its device 'GPU-bare-0' cannot be time-sliced");
}

}  // namespace
}  // namespace gpupool
