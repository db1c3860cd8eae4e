// Device health on the agent: XID classification, HealthMonitor (fatal events → faults, MIG
// instances follow their GPU, counters), the simulated backend's event file, and
// TaskRunner::FailDevices on real child processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "agent/config.h"
#include "agent/health/health_monitor.h"
#include "agent/health/xid.h"
#include "agent/sim_backend.h"
#include "agent/task_runner.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/gpupool-health-test-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(XidTest, FatalCodesAreTheResetOrReplaceOnes) {
  for (int32_t xid : {48, 62, 64, 74, 79, 92, 95, 119, 120, 140}) {
    EXPECT_TRUE(XidIsFatal(xid)) << xid;
  }
  for (int32_t xid : {13, 31, 43, 45, 63, 94, 1, 999}) EXPECT_FALSE(XidIsFatal(xid)) << xid;
  EXPECT_EQ(DescribeXid(79), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(DescribeXid(999), "XID 999");
}

Inventory MigInventory() {
  Inventory inv;
  auto add = [&](const std::string& uuid, const std::string& parent) {
    Device d;
    d.uuid = uuid;
    d.parent_uuid = parent;
    inv.devices.push_back(d);
  };
  add("GPU-0", "");
  add("MIG-0-0", "GPU-0");
  add("MIG-0-1", "GPU-0");
  add("GPU-1", "");
  return inv;
}

TEST(HealthMonitorTest, FatalEventsFaultTheDeviceAndItsMigInstances) {
  HealthMonitor m;
  const Inventory inv = MigInventory();
  using K = DeviceEvent::Kind;
  // Non-fatal: counted, no fault.
  EXPECT_TRUE(
      m.Observe({{"GPU-0", K::kXid, 13, 100}, {"GPU-0", K::kEccCorrected, 0, 101}}, inv).empty());
  EXPECT_EQ(m.FaultOf("GPU-0"), nullptr);
  std::vector<DeviceFault> f = m.Observe({{"GPU-0", K::kXid, 48, 200}}, inv);
  ASSERT_EQ(f.size(), 3u);  // the GPU and both instances
  EXPECT_EQ(f[0].uuid, "GPU-0");
  EXPECT_EQ(f[0].reason, "XID 48 (double-bit ECC error)");
  EXPECT_EQ(f[0].fault_id, 200);
  EXPECT_EQ(f[1].uuid, "MIG-0-0");
  EXPECT_EQ(f[1].reason, "XID 48 (double-bit ECC error) on its GPU GPU-0");
  EXPECT_EQ(m.FaultOf("GPU-1"), nullptr);
  const HealthMonitor::Counters c = m.CountersOf("GPU-0");
  EXPECT_EQ(c.xids, 2);
  EXPECT_EQ(c.last_xid, 48);
  EXPECT_EQ(c.ecc_corrected, 1);
  DeviceSample s;
  s.uuid = "GPU-0";
  m.Annotate(&s);
  EXPECT_EQ(s.xid_errors, 2);
  EXPECT_EQ(s.last_xid, 48);
  // A later fatal event is a new fault with a larger id, even with the same clock reading.
  f = m.Observe({{"GPU-1", K::kEccUncorrected, 0, 200}}, inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].reason, "uncorrectable (double-bit) ECC error");
  EXPECT_EQ(f[0].fault_id, 201);
}

TEST(SimEventsTest, LinesAppendedToTheEventFileBecomeEvents) {
  const std::string dir = TempDir();
  auto layout = ParseSimLayout("gpus:\n  - model: H100-SXM\n    count: 2\n", Catalog::Builtin());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  layout->event_file = dir + "/sim-events";
  SimulatedBackend b("n1", *layout, Catalog::Builtin());
  EXPECT_TRUE(b.PollEvents().empty());  // no file yet
  EXPECT_NE(b.EventSource().find(dir + "/sim-events"), std::string::npos);
  {
    std::ofstream f(layout->event_file, std::ios::app);
    f << "xid GPU-sim-n1-0 79\n# a comment\n\nbogus line\nxid GPU-sim-n1-0 x\n"
         "ecc GPU-sim-n1-1 corrected\nxid GPU-sim-n1-1 4";  // the last line is not complete yet
  }
  std::vector<DeviceEvent> e = b.PollEvents();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].uuid, "GPU-sim-n1-0");
  EXPECT_EQ(e[0].kind, DeviceEvent::Kind::kXid);
  EXPECT_EQ(e[0].xid, 79);
  EXPECT_GT(e[0].time_us, 0);
  EXPECT_EQ(e[1].kind, DeviceEvent::Kind::kEccCorrected);
  std::ofstream(layout->event_file, std::ios::app) << "8\n";  // completes "xid … 48"
  e = b.PollEvents();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].uuid, "GPU-sim-n1-1");
  EXPECT_EQ(e[0].xid, 48);
  EXPECT_TRUE(b.PollEvents().empty());
  b.InjectEvent({"GPU-sim-n1-0", DeviceEvent::Kind::kEccUncorrected, 0, 5});
  EXPECT_EQ(b.PollEvents().size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(FailDevicesTest, KillsOnlyTheTasksOfTheFaultedDeviceAndReportsTheReason) {
  const std::string dir = TempDir();
  TaskRunnerOptions o;
  o.data_dir = dir;
  TaskRunner runner(o);
  std::mutex mu;
  std::map<std::string, TaskStatus> ended;
  runner.SetListener("n1", [&](const TaskStatus& st) {
    std::lock_guard lock(mu);
    ended[st.task_id] = st;
  });
  auto spec = [](const std::string& id, const std::string& uuid) {
    TaskSpec s;
    s.owner = "n1";
    s.task_id = id;
    s.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 60"};  // ignores SIGTERM: no grace is given
    s.devices = {{uuid, 0, 0, 100}};
    return s;
  };
  ASSERT_TRUE(runner.Start(spec("1.0", "GPU-0")).ok());
  ASSERT_TRUE(runner.Start(spec("2.0", "GPU-1")).ok());
  const std::vector<std::string> failed = runner.FailDevices(
      "n1", {"GPU-0"}, "device GPU-0 failed: XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(failed, std::vector<std::string>{"1.0"});
  ASSERT_TRUE(::gpupool::testing::WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return ended.contains("1.0");
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20)));
  {
    std::lock_guard lock(mu);
    const TaskStatus& st = ended["1.0"];
    EXPECT_EQ(st.phase, TaskPhase::kFailed);
    EXPECT_TRUE(st.device_fault);
    EXPECT_EQ(st.reason, "device GPU-0 failed: XID 79 (GPU has fallen off the bus)");
    EXPECT_FALSE(ended.contains("2.0"));
  }
  EXPECT_EQ(runner.Running("n1").size(), 1u);
  runner.StopAll("n1", 0, "test over");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::agent
