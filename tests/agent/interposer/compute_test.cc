// The strict compute cap on the fake device's clock: kernels of 1 ms, one context's at a time,
// contexts preempted every 2 ms timeslice while another waits (a GPU without MPS; fake_engine.cc),
// each tenant's GPU time is what the fake driver accounts to its process, and the shares are
// measured over a 1.5 s window once both run.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/agent/interposer/harness.h"

namespace gpupool::interposer_test {
namespace {

constexpr uint64_t kDevice = 64 * kMiB;

ledger::Limits Cap(uint32_t percent) {
  ledger::Limits l;
  l.vram = 16 * kMiB;
  l.compute_percent = percent;
  return l;
}

// GPU time over wall time, in percent, for each pid over a 1.5 s window after a 0.3 s warm-up.
std::vector<double> Shares(const Task& device, const std::vector<pid_t>& pids) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<uint64_t> b0;
  fakecuda::Truth t = device.Truth();
  auto busy = [](const fakecuda::Truth& tr, pid_t pid) {
    for (const auto& e : tr.procs)
      if (e.pid == pid) return e.busy_ns;
    return uint64_t{0};
  };
  for (pid_t p : pids) b0.push_back(busy(t, p));
  uint64_t t0 = NowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  t = device.Truth();
  uint64_t wall_ms = NowMs() - t0;
  std::vector<double> shares;
  for (size_t i = 0; i < pids.size(); ++i)
    shares.push_back(100.0 * static_cast<double>(busy(t, pids[i]) - b0[i]) / 1e6 /
                     static_cast<double>(wall_ms));
  return shares;
}

class ComputeCap : public ::testing::TestWithParam<const char*> {};

// Two saturating tenants capped 30 and 70 on one device get 30 and 70 (± 5 points). Their
// ledgers share the device's arbiter, as the agent's do: the fake time-slices the two contexts as
// a GPU does, so each one's event pairs also span the other's slices (without the arbiter:
// 21.4 / 58.8, as on the H200). A cap is never exceeded, in any attempt. The shares themselves
// depend on the host too (the fake's device runs on the test's threads; on a loaded CI machine
// the 70 % tenant once got 63.4): each attempt is 2 s of fresh tenants, and one of three must
// deliver both shares.
TEST_P(ComputeCap, TwoTenantsCapped30And70GetTheirShares) {
  std::vector<double> s;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto arbiter = std::make_shared<ledger::DeviceArbiter>();
    Task a(kDevice, Cap(30), kMiB, nullptr, arbiter);
    Task b(kDevice, Cap(70), kMiB, &a, arbiter);
    auto pa = a.Start({"compute", GetParam(), "2.1"});
    auto pb = b.Start({"compute", GetParam(), "2.1"});
    ASSERT_EQ(pa->ReadLine(), "ready");
    ASSERT_EQ(pb->ReadLine(), "ready");
    pa->Write("go\n");
    pb->Write("go\n");
    s = Shares(a, {pa->pid(), pb->pid()});
    fprintf(stderr, "%s, attempt %d: shares %.1f %.1f\n", GetParam(), attempt, s[0], s[1]);
    EXPECT_LE(s[0], 35.0) << "the 30 % cap was exceeded";
    EXPECT_LE(s[1], 75.0) << "the 70 % cap was exceeded";
    EXPECT_EQ(pa->ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
    EXPECT_EQ(pb->ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
    if (std::abs(s[0] - 30.0) <= 5.0 && std::abs(s[1] - 70.0) <= 5.0) break;
  }
  EXPECT_NEAR(s[0], 30.0, 5.0);
  EXPECT_NEAR(s[1], 70.0, 5.0);
}

// One tenant capped 50 alone on the device gets 50 ± 5 %, not the idle rest.
TEST_P(ComputeCap, OneTenantCapped50AloneGetsHalf) {
  Task a(kDevice, Cap(50));
  auto pa = a.Start({"compute", GetParam(), "2.1"});
  ASSERT_EQ(pa->ReadLine(), "ready");
  pa->Write("go\n");
  std::vector<double> s = Shares(a, {pa->pid()});
  fprintf(stderr, "%s: share %.1f\n", GetParam(), s[0]);
  EXPECT_NEAR(s[0], 50.0, 5.0);
  EXPECT_EQ(pa->ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
}

// A device whose timer runs fast against the host's clock (1.34×, as on the H200 VM of
// docs/benchmarks.md, where a 50 % cap gave 38 %): the interposer calibrates the two clocks, and
// the cap still gives half the device's time.
TEST(ComputeCapClock, ACapHoldsWhenTheDeviceClockRunsFast) {
  Task a(kDevice, Cap(50));
  std::vector<std::string> env = a.Env();
  env.push_back("GPUPOOL_FAKE_CUDA_CLOCK_RATE=1.34");
  Child p({GPUPOOL_PROBE, "compute", "plain", "2.1"}, env);
  ASSERT_EQ(p.ReadLine(), "ready");
  p.Write("go\n");
  std::vector<double> s = Shares(a, {p.pid()});
  fprintf(stderr, "clock 1.34: share %.1f\n", s[0]);
  EXPECT_NEAR(s[0], 50.0, 5.0);
  EXPECT_EQ(p.ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
}

// Uncapped, a tenant alone keeps the device busy (the cap, not the harness, sets the shares).
TEST(ComputeCapBaseline, AnUncappedTenantAloneSaturatesTheDevice) {
  Task a(kDevice, Cap(100));
  auto pa = a.Start({"compute", "plain", "2.1"});
  ASSERT_EQ(pa->ReadLine(), "ready");
  pa->Write("go\n");
  std::vector<double> s = Shares(a, {pa->pid()});
  EXPECT_GT(s[0], 85.0);
}

// Fair mode: a fair tenant alone bursts into the idle device; once a strict tenant starts, the
// fair one gives the idle time back within 1 s and both get their shares.
TEST(ComputeFair, AFairTenantBurstsIntoIdleTimeAndGivesItBackWithinOneSecond) {
  // As above: the fair tenant never keeps more than its share once the other has run for 1 s,
  // in any attempt; the shares are delivered in one of three.
  std::vector<double> alone, both;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto arbiter = std::make_shared<ledger::DeviceArbiter>();
    ledger::Limits fair = Cap(30);
    fair.compute_fair = true;
    Task a(kDevice, fair, kMiB, nullptr, arbiter);
    Task b(kDevice, Cap(70), kMiB, &a, arbiter);
    auto pa = a.Start({"compute", "plain", "4.5"});
    ASSERT_EQ(pa->ReadLine(), "ready");
    pa->Write("go\n");
    alone = Shares(a, {pa->pid()});
    auto pb = b.Start({"compute", "plain", "3.5"});
    ASSERT_EQ(pb->ReadLine(), "ready");
    pb->Write("go\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // + Shares' 300 ms: 1 s
    both = Shares(a, {pa->pid(), pb->pid()});
    fprintf(stderr, "fair, attempt %d: alone %.1f, then %.1f %.1f\n", attempt, alone[0], both[0],
            both[1]);
    EXPECT_LE(both[0], 35.0) << "the fair tenant kept the other's share";
    EXPECT_LE(both[1], 75.0) << "the 70 % cap was exceeded";
    EXPECT_EQ(pa->ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
    EXPECT_EQ(pb->ReadUntil("done", 10000).rfind("done launches=", 0), 0u);
    if (alone[0] > 85.0 && std::abs(both[0] - 30.0) <= 5.0 && std::abs(both[1] - 70.0) <= 5.0)
      break;
  }
  EXPECT_GT(alone[0], 85.0);
  EXPECT_NEAR(both[0], 30.0, 5.0);
  EXPECT_NEAR(both[1], 70.0, 5.0);
}

INSTANTIATE_TEST_SUITE_P(Launches, ComputeCap,
                         ::testing::Values("plain", "plain-ptsz", "ex", "coop", "graph"));

}  // namespace
}  // namespace gpupool::interposer_test
