// Issue 27 end to end: one pool mixing a whole GPU, a GPU time-sliced into 4 slots and a MIG
// instance time-sliced into 2. A real gpupoold (embedded PostgreSQL) and a gpupool-agent on the
// simulated backend (an H100 split into two 3g.40gb instances beside two whole H100s); an admin
// sets the slots over REST, jobs of each kind are submitted and land where they belong, bad
// requests are refused with the reason, and the usage ledger meters device-, slot- and
// instance-seconds. The slots survive a daemon restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/usage.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/token_daemon.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpResult;
using api::testing::http::verb;
using testing::ChildProcess;
using testing::DaemonProcess;

constexpr char kAdmin[] = "admin-token-slots-0123456789";
constexpr char kAcme[] = "acme-token-slots-0123456789";

class DeviceSlotsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-slots-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    auto d = testing::StartDaemonWithTokens(
        dir_, {{kAdmin, "ops", true}, {kAcme, "acme", false}},
        "scheduler:\n  heartbeat_interval_ms: 200\n  heartbeat_timeout_ms: 30000\n"
        "  node_lease_ms: 30000\n  stop_grace_period_ms: 1000\n"
        "metering:\n  interval_s: 1\n");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/pools",
                   R"({"pool": {"name": "mixed", "visibility": "VISIBILITY_PUBLIC",
                                "sharingMode": "SHARING_MODE_FRACTIONAL",
                                "requiredCapabilities": ["none"]}})")
                  .status,
              200);
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/tenants", R"({"tenant": {"path": "acme"}})").status,
              200);
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = "node-a";
    o.scheduler = daemon_->grpc_address();
    o.pool = "mixed";
    o.gpus_yaml = "  - {model: H100-SXM, count: 3, mig: {\"2\": [3g.40gb, 3g.40gb]}}\n";
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agent_ = std::move(child).value();
    ASSERT_TRUE(testing::WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; },
                                 std::chrono::seconds(120), std::chrono::milliseconds(100)))
        << "the agent did not register";
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      agent_->Wait(std::chrono::seconds(10));
    }
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  HttpResult Rest(const std::string& token, verb v, const std::string& target,
                  const std::string& body = "") {
    return testing::RestAs(*daemon_, token, v, target, body);
  }

  v1::Node Node() {
    HttpResult r = Rest(kAdmin, verb::get, "/v1/nodes/node-a");
    return r.status == 200 ? testing::ParseJson<v1::Node>(r.body) : v1::Node();
  }

  HttpResult SetSlots(const std::string& token, const std::string& device, int slots) {
    return Rest(token, verb::post, "/v1/nodes/node-a/devices/" + device + ":set-slots",
                R"({"slots": )" + std::to_string(slots) + "}");
  }

  std::string Submit(const std::string& resources) {
    const HttpResult r =
        Rest(kAcme, verb::post, "/v1/jobs",
             R"({"spec": {"tenant": "acme", "pool": "mixed", "taskCount": 1, "template": )"
             R"({"command": ["/bin/sh", "-c", "sleep 600"], "resources": )" +
                 resources + "}}}");
    EXPECT_EQ(r.status, 200) << r.body;
    const size_t at = r.body.find("\"jobId\":\"");
    if (at == std::string::npos) return "";
    const size_t start = at + 9;
    return r.body.substr(start, r.body.find('"', start) - start);
  }

  v1::Job Job(const std::string& id) {
    return testing::ParseJson<v1::Job>(Rest(kAdmin, verb::get, "/v1/jobs/" + id).body);
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<ChildProcess> agent_;
};

TEST_F(DeviceSlotsE2eTest, AMixedPoolPlacesEachKindWhereItBelongsAndMetersIt) {
  // The devices: two whole H100s (indices 0 and 1) and GPU 2's two 3g.40gb instances.
  v1::Node node = Node();
  std::string gpu0, gpu1, gpu2, mig_a, mig_b;
  for (const v1::Device& d : node.devices()) {
    if (!d.mig_profile().empty()) {
      (mig_a.empty() ? mig_a : mig_b) = d.id();
    } else if (d.index() == 0) {
      gpu0 = d.id();
    } else if (d.index() == 1) {
      gpu1 = d.id();
    } else {
      gpu2 = d.id();
    }
  }
  ASSERT_FALSE(gpu0.empty() || gpu1.empty() || mig_a.empty() || mig_b.empty())
      << node.DebugString();

  // Bad input: named and refused; a tenant may not slice at all.
  HttpResult r = SetSlots(kAcme, gpu1, 4);
  EXPECT_EQ(r.status, 403) << r.body;
  r = SetSlots(kAdmin, gpu1, 65);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("slots: 65 is outside 0..64"), std::string::npos) << r.body;
  r = SetSlots(kAdmin, "GPU-nope", 2);
  EXPECT_EQ(r.status, 404) << r.body;
  if (!gpu2.empty()) {  // the MIG parent, when the node lists it
    r = SetSlots(kAdmin, gpu2, 2);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("partitioned into MIG instances"), std::string::npos) << r.body;
  }

  // GPU 1 into 4 slots, the first 3g.40gb instance into 2.
  r = SetSlots(kAdmin, gpu1, 4);
  ASSERT_EQ(r.status, 200) << r.body;
  r = SetSlots(kAdmin, mig_a, 2);
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<std::string, int> slots;
  const v1::Node sliced = testing::ParseJson<v1::Node>(r.body);
  for (const v1::Device& d : sliced.devices()) slots[d.id()] = d.time_slice_slots();
  EXPECT_EQ(slots[gpu0], 0);
  EXPECT_EQ(slots[gpu1], 4);
  EXPECT_EQ(slots[mig_a], 2);
  EXPECT_EQ(slots[mig_b], 0);

  std::vector<std::string> jobs;
  const std::string whole = Submit(R"({"wholeGpus": {"count": 1}})");
  jobs.push_back(whole);
  std::vector<std::string> shares, migs;
  for (int i = 0; i < 4; ++i)
    shares.push_back(Submit(R"({"fractional": {"milliTflops": "100000", "vramMib": "10240"}})"));
  for (int i = 0; i < 3; ++i) migs.push_back(Submit(R"({"mig": {"profile": "3g.40gb"}})"));
  jobs.insert(jobs.end(), shares.begin(), shares.end());
  jobs.insert(jobs.end(), migs.begin(), migs.end());
  for (const std::string& id : jobs) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          v1::Job j = Job(id);
          return j.tasks_size() == 1 && j.tasks(0).state() == v1::TASK_STATE_RUNNING;
        },
        std::chrono::seconds(120), std::chrono::milliseconds(100)))
        << Job(id).DebugString();
  }
  auto grant = [&](const std::string& id) { return Job(id).tasks(0).allocations(0); };
  EXPECT_EQ(grant(whole).device_id(), gpu0);
  EXPECT_TRUE(grant(whole).exclusive());
  for (const std::string& id : shares) {
    v1::Allocation a = grant(id);
    EXPECT_EQ(a.device_id(), gpu1);
    EXPECT_EQ(a.slots(), 1);
    EXPECT_FALSE(a.exclusive());
    EXPECT_EQ(a.vram_mib(), 81'920 / 4);  // the slot's share, not the 10 GiB asked
  }
  int on_slots = 0, whole_instance = 0;
  for (const std::string& id : migs) {
    v1::Allocation a = grant(id);
    if (a.device_id() == mig_a && a.slots() == 1) ++on_slots;
    if (a.device_id() == mig_b && a.exclusive()) ++whole_instance;
  }
  EXPECT_EQ(on_slots, 2);
  EXPECT_EQ(whole_instance, 1);
  std::map<std::string, int> used;
  const v1::Node busy = Node();
  for (const v1::Device& d : busy.devices()) used[d.id()] = d.slots_used();
  EXPECT_EQ(used[gpu1], 4);
  EXPECT_EQ(used[mig_a], 2);
  // A busy device's count does not change.
  r = SetSlots(kAdmin, gpu1, 2);
  EXPECT_EQ(r.status, 400) << r.body;  // FAILED_PRECONDITION
  EXPECT_NE(r.body.find("holds running work"), std::string::npos) << r.body;

  // Metered: whole device-seconds, slot-seconds of the 4 + 2 slots, instance-seconds of mig_b.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        v1::GetUsageResponse u = testing::ParseJson<v1::GetUsageResponse>(
            Rest(kAdmin, verb::get, "/v1/usage?tenant=acme").body);
        return u.totals().slot_seconds() >= 6 * 2 && u.totals().device_seconds() >= 2 &&
               u.totals().mig_instance_seconds() >= 2;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(250)));
  for (const std::string& id : jobs)
    EXPECT_EQ(Rest(kAcme, verb::post, "/v1/jobs/" + id + ":cancel", "{}").status, 200);
  v1::GetUsageResponse u = testing::ParseJson<v1::GetUsageResponse>(
      Rest(kAdmin, verb::get, "/v1/usage?tenant=acme").body);
  // Slots are never counted as whole instances or devices: 6 slots against 2 exclusive grants.
  EXPECT_GT(u.totals().slot_seconds(), 2 * u.totals().device_seconds()) << u.DebugString();
  EXPECT_GT(u.totals().slot_seconds(), 2 * u.totals().mig_instance_seconds()) << u.DebugString();

  // The counts are stored: a restarted daemon still has them.
  EXPECT_EQ(daemon_->Stop(), 0);
  ASSERT_TRUE(daemon_->Restart().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; },
                               std::chrono::seconds(120), std::chrono::milliseconds(100)));
  slots.clear();
  const v1::Node restarted = Node();
  for (const v1::Device& d : restarted.devices()) slots[d.id()] = d.time_slice_slots();
  EXPECT_EQ(slots[gpu1], 4);
  EXPECT_EQ(slots[mig_a], 2);
}

}  // namespace
}  // namespace gpupool
