// The fake device's time-slicing, without the interposer: contexts of two processes busy with
// 1 ms kernels share the device half and half, each preempted at the end of its timeslice (2 ms),
// mid-kernel. As on an H200 (driver 580, no MPS), the event pair around a kernel that was
// preempted spans the other context's slice too, so a context's pairs add up to more than the
// time it had the device; the fake's per-process GPU time counts only the time its kernels ran.
#include <gtest/gtest.h>

#include <map>

#include "tests/agent/interposer/harness.h"

namespace gpupool::interposer_test {
namespace {

constexpr uint64_t kDevice = 64 * kMiB;

ledger::Limits Unlimited() {
  ledger::Limits l;
  l.vram = 16 * kMiB;
  return l;
}

// "done launches=… pair_us_mean=… pair_us_max=…" as numbers by name.
std::map<std::string, double> Fields(const std::string& line) {
  std::map<std::string, double> out;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string::npos) end = line.size();
    const std::string word = line.substr(at, end - at);
    const size_t eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = strtod(word.c_str() + eq + 1, nullptr);
    at = end + 1;
  }
  return out;
}

uint64_t BusyNs(const fakecuda::Truth& t, pid_t pid) {
  for (const auto& e : t.procs)
    if (e.pid == pid) return e.busy_ns;
  return 0;
}

TEST(FakeTimeslice, TwoBusyContextsShareTheDeviceAndTheirPairsSpanTheOthersSlices) {
  Task task(kDevice, Unlimited());

  // Alone, a context keeps the device: a kernel's pair measures its own time (1 ms, and the
  // host timer's lateness in waking its thread).
  auto alone = task.Start({"slices", "0.5"}, /*preload=*/false);
  ASSERT_EQ(alone->ReadLine(), "ready");
  alone->Write("go\n");
  const std::string alone_done = alone->ReadUntil("done", 10000);
  ASSERT_EQ(alone_done.rfind("done launches=", 0), 0u) << alone_done;
  const double alone_us = Fields(alone_done)["pair_us_mean"];
  alone.reset();

  auto a = task.Start({"slices", "1.8"}, /*preload=*/false);
  auto b = task.Start({"slices", "1.8"}, /*preload=*/false);
  ASSERT_EQ(a->ReadLine(), "ready");
  ASSERT_EQ(b->ReadLine(), "ready");
  a->Write("go\n");
  b->Write("go\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  fakecuda::Truth t = task.Truth();
  const uint64_t a0 = BusyNs(t, a->pid()), b0 = BusyNs(t, b->pid());
  const uint64_t t0 = NowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  t = task.Truth();
  const double wall_ns = static_cast<double>(NowMs() - t0) * 1e6;
  const double share_a = 100.0 * static_cast<double>(BusyNs(t, a->pid()) - a0) / wall_ns;
  const double share_b = 100.0 * static_cast<double>(BusyNs(t, b->pid()) - b0) / wall_ns;
  const std::string a_done = a->ReadUntil("done", 10000), b_done = b->ReadUntil("done", 10000);
  ASSERT_EQ(a_done.rfind("done launches=", 0), 0u) << a_done;
  ASSERT_EQ(b_done.rfind("done launches=", 0), 0u) << b_done;
  const double a_us = Fields(a_done)["pair_us_mean"], b_us = Fields(b_done)["pair_us_mean"];
  fprintf(stderr,
          "alone: pair %.0f µs; two: shares %.1f %.1f, pairs %.0f %.0f µs (max %.0f %.0f)\n",
          alone_us, share_a, share_b, a_us, b_us, Fields(a_done)["pair_us_max"],
          Fields(b_done)["pair_us_max"]);

  EXPECT_GT(alone_us, 900.0);
  EXPECT_LT(alone_us, 1300.0);
  // Each got half the device: its kernels' own time, not the time they spent preempted (the two
  // together cannot pass the wall time).
  EXPECT_NEAR(share_a, 50.0, 10.0);
  EXPECT_NEAR(share_b, 50.0, 10.0);
  EXPECT_LE(share_a + share_b, 101.0);
  // A preempted kernel's pair spans the other context's slice as well.
  EXPECT_GE(a_us, 1300.0);
  EXPECT_GE(b_us, 1300.0);
}

}  // namespace
}  // namespace gpupool::interposer_test
