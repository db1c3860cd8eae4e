// The watchdog's rules against a scripted process-memory source and ledger (no processes are
// harmed: kills are recorded). Table-driven: what the driver reports, what the ledger charges,
// and who is killed on which tick.
#include "agent/interposer/watchdog/watchdog.h"

#include <gtest/gtest.h>

namespace gpupool::watchdog {
namespace {

class Script : public ProcessMemorySource {
 public:
  std::vector<GpuProcess> now;
  bool fail = false;
  bool Read(std::vector<GpuProcess>* out, std::string* error) override {
    if (fail) {
      *error = "nvml gone";
      return false;
    }
    *out = now;
    return true;
  }
};

struct Rig {
  Script nvml;
  ledger::Usage usage;
  std::vector<pid_t> killed;
  std::unique_ptr<Watchdog> dog;
  explicit Rig(uint64_t grant, uint64_t slack = 0) {
    Options o;
    o.vram_grant = grant;
    o.slack_bytes = slack;
    o.in_task = [](pid_t pid) { return pid < 1000; };  // pids ≥ 1000: other tasks
    o.ledger = [this] { return usage; };
    o.kill = [this](pid_t pid) { killed.push_back(pid); };
    dog = std::make_unique<Watchdog>(&nvml, o);
  }
  void Charge(pid_t pid, uint64_t vram) { usage.processes.push_back({pid, vram, 0, false}); }
};

TEST(Watchdog, HonestProcessesAreLeftAlone) {
  Rig r(100);
  r.nvml.now = {{1, 0, 40}, {2, 0, 60}, {1000, 0, 500}};  // 1000: another task's, over anything
  r.Charge(1, 40);
  r.Charge(2, 60);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(r.dog->Tick().empty());
  EXPECT_TRUE(r.killed.empty());
}

TEST(Watchdog, AProcessOverItsChargeIsKilledOnTheSecondTick) {
  Rig r(100);
  r.nvml.now = {{1, 0, 40}, {2, 0, 30}};
  r.Charge(1, 40);                     // 2 holds 30 with no charge: no interposer
  EXPECT_TRUE(r.dog->Tick().empty());  // one strike
  std::vector<Verdict> v = r.dog->Tick();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].pid, 2);
  EXPECT_EQ(v[0].gpu_bytes, 30u);
  EXPECT_EQ(v[0].ledger_bytes, 0u);
  EXPECT_NE(v[0].reason.find("bypassed the interposer"), std::string::npos);
  EXPECT_EQ(r.killed, std::vector<pid_t>{2});
}

TEST(Watchdog, AMomentaryExcessIsNotAStrike) {
  Rig r(100);
  r.Charge(1, 40);
  r.nvml.now = {{1, 0, 50}};  // a race between the two readings, once
  EXPECT_TRUE(r.dog->Tick().empty());
  r.nvml.now = {{1, 0, 40}};
  EXPECT_TRUE(r.dog->Tick().empty());
  r.nvml.now = {{1, 0, 50}};
  EXPECT_TRUE(r.dog->Tick().empty());  // strikes start over
  EXPECT_TRUE(r.killed.empty());
}

TEST(Watchdog, SlackCoversTheDriversRounding) {
  Rig r(100, /*slack=*/8);
  r.Charge(1, 40);
  r.nvml.now = {{1, 0, 48}};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.dog->Tick().empty());
  r.nvml.now = {{1, 0, 49}};
  r.dog->Tick();
  EXPECT_EQ(r.dog->Tick().size(), 1u);
}

TEST(Watchdog, ATaskOverItsGrantWithNoSingleCulpritLosesEveryProcessHoldingMemory) {
  Rig r(100);
  // Charged as they hold (e.g. a forged ledger), but together past the grant.
  r.Charge(1, 70);
  r.Charge(2, 70);
  r.nvml.now = {{1, 0, 70}, {2, 0, 70}};
  EXPECT_TRUE(r.dog->Tick().empty());
  std::vector<Verdict> v = r.dog->Tick();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_NE(v[0].reason.find("its grant is 100"), std::string::npos) << v[0].reason;
}

TEST(Watchdog, MemoryOnSeveralDevicesIsSummed) {
  Rig r(100);
  r.Charge(1, 50);
  r.nvml.now = {{1, 0, 30}, {1, 1, 30}};
  r.dog->Tick();
  EXPECT_EQ(r.dog->Tick().size(), 1u);
}

TEST(Watchdog, AFailedReadKillsNothing) {
  Rig r(100);
  r.nvml.now = {{1, 0, 500}};
  r.dog->Tick();
  r.nvml.fail = true;
  bool ok = true;
  std::string error;
  EXPECT_TRUE(r.dog->Tick(&ok, &error).empty());
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "nvml gone");
}

TEST(Watchdog, IsDescendantFollowsParents) {
  EXPECT_TRUE(IsDescendant(getpid(), getpid()));
  EXPECT_TRUE(IsDescendant(getpid(), getppid()));
  EXPECT_FALSE(IsDescendant(getppid(), getpid()));
}

}  // namespace
}  // namespace gpupool::watchdog
