// The interposer against the fake driver, in real child processes: every allocation path at the
// grant, the slice in cuMemGetInfo, a randomized storm, kill -9, IPC and spill.
#include <gtest/gtest.h>

#include <random>

#include "tests/agent/interposer/harness.h"

namespace gpupool::interposer_test {
namespace {

constexpr uint64_t kDevice = 64 * kMiB;

ledger::Limits Grant(uint64_t vram, uint64_t spill = 0) {
  ledger::Limits l;
  l.vram = vram;
  l.spill = spill;
  return l;
}

// Every path: what is left of a 17 MiB grant after the 1 MiB context (16 MiB) is granted, one
// byte more is CUDA_ERROR_OUT_OF_MEMORY (VMM: one granule more, sizes being whole granules),
// although the device has 64 MiB. The fake's truth never passes the grant.
TEST(InterposerPaths, EveryPathHonoursTheGrantToTheByte) {
  const char* paths[] = {"plain", "pitch", "managed", "array", "vmm", "pool", "async", "graph"};
  for (const char* path : paths) {
    SCOPED_TRACE(path);
    Task task(kDevice, Grant(17 * kMiB));
    {
      auto fits = task.Start({"alloc", path, std::to_string(16 * kMiB)});
      EXPECT_EQ(fits->ReadLine(), "rc=0");
      // Reserved before allocated: the ledger holds what the driver holds, to the byte.
      EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), fits->pid()), 17 * kMiB);
      EXPECT_EQ(task.Truth().BytesOf(fits->pid()), 17 * kMiB);
      fits->CloseStdin();
      EXPECT_EQ(fits->Wait(), 0);
    }
    uint64_t over = std::string(path) == "vmm" ? 18 * kMiB : 16 * kMiB + 1;
    auto refused = task.Start({"alloc", path, std::to_string(over)});
    EXPECT_EQ(refused->ReadLine(), "rc=2");                     // CUDA_ERROR_OUT_OF_MEMORY
    EXPECT_EQ(task.Truth().BytesOf(refused->pid()), 1 * kMiB);  // its context only
    refused->CloseStdin();
    EXPECT_EQ(refused->Wait(), 0);
    EXPECT_LE(task.Truth().high_water, 17 * kMiB);
  }
}

// A program that finds every entry point through cuGetProcAddress_v2 (the CUDA runtime's way,
// with the per-thread default stream) is held to the grant on each of them: as a CUDA 12.8
// runtime on a 12.8 driver, and as a CUDA 13 runtime on a 13.0 driver, which answers
// "cuCtxSynchronize" with its (CUcontext) variant (seen on driver 580: refused, every CUDA 13
// program failed at its first synchronize).
TEST(InterposerPaths, RuntimeStyleResolutionGetsEveryHook) {
  for (const char* version : {"12080", "13000"}) {
    SCOPED_TRACE(version);
    Task task(kDevice, Grant(17 * kMiB));
    std::vector<std::string> env = task.Env();
    env.push_back(std::string("GPUPOOL_FAKE_CUDA_DRIVER_VERSION=") + version);
    env.push_back(std::string("GPUPOOL_PROBE_CUDA_VERSION=") + version);
    Child p({GPUPOOL_PROBE, "runtime", std::to_string(16 * kMiB)}, env);
    EXPECT_EQ(p.ReadLine(), "alloc rc=0");
    EXPECT_EQ(p.ReadLine(), "async rc=2");  // one byte past the grant, from a pool
    EXPECT_EQ(p.ReadLine(), "free rc=0");
    EXPECT_EQ(p.ReadLine(), "async rc=0");
    EXPECT_EQ(p.ReadLine(), "ctx-sync rc=0");
    EXPECT_EQ(p.ReadLine(), "total=" + std::to_string(17 * kMiB));
    EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), p.pid()), task.Truth().BytesOf(p.pid()));
    p.CloseStdin();
    EXPECT_EQ(p.Wait(), 0);
  }
}

// The v1 ABIs a CUDA 13 runtime and its libraries still ask for by name (cuBLAS did not start
// on driver 580 while they were refused): graph memory instantiated through "cuGraphInstantiate"
// (cuGetProcAddress at 11.0, and dlsym) is held to the grant, and releasing the primary context
// through "cuDevicePrimaryCtxRelease" (7.0) gives its charge back.
TEST(InterposerPaths, LegacyEntryPointsAreHookedNotRefused) {
  Task task(kDevice, Grant(17 * kMiB));
  auto over = task.Start({"legacy", std::to_string(16 * kMiB + 1)});
  EXPECT_EQ(over->ReadLine(), "instantiate rc=2");
  EXPECT_EQ(over->ReadLine(), "instantiate rc=2");
  EXPECT_EQ(over->ReadLine(), "release rc=0");
  over->CloseStdin();
  EXPECT_EQ(over->Wait(), 0);
  auto fits = task.Start({"legacy", std::to_string(16 * kMiB)});
  EXPECT_EQ(fits->ReadLine(), "instantiate rc=0");
  EXPECT_EQ(fits->ReadLine(), "instantiate rc=0");
  EXPECT_EQ(fits->ReadLine(), "release rc=0");
  // The last reference to the primary context is gone, and with it its 1 MiB charge.
  EXPECT_TRUE(
      Eventually([&] { return LedgerVram(task.ledger().Snapshot(), fits->pid()) == 0; }, 1000));
  EXPECT_LE(task.Truth().high_water, 17 * kMiB);
  fits->CloseStdin();
  EXPECT_EQ(fits->Wait(), 0);
}

// Stream capture under a compute cap: a launch into a capturing stream is recorded, not run, and
// the meter must leave it alone. It used to record its events into the capture and query them,
// which the driver prohibits: PyTorch's torch.cuda.graph under a cap failed on driver 580 with
// "operation failed due to a previous error during capture". The fake models the rule (the
// second capture, whose event is queried, is invalidated), natively and interposed alike.
TEST(InterposerCompute, GraphCaptureUnderACapIsNotInvalidated) {
  ledger::Limits l = Grant(16 * kMiB);
  l.compute_percent = 50;
  Task task(kDevice, l);
  for (bool preload : {false, true}) {
    SCOPED_TRACE(preload ? "interposed" : "native");
    auto p = task.Start({"capture", "3"}, preload);
    EXPECT_EQ(p->ReadLine(), "capture rc=0 end rc=0");
    EXPECT_EQ(p->ReadLine(), "replay rc=0");
    EXPECT_EQ(p->ReadLine(), "query rc=900 end rc=901");  // the documented rule, modelled
    EXPECT_EQ(p->Wait(), 0);
  }
}

// PyTorch's cudaMallocAsync backend under torch.cuda.graph: a stream-ordered allocation inside a
// capture allocates nothing then (it becomes a graph memory node; the fake follows the
// programming guide's "Graph Memory Nodes"), so nothing is charged until the graph is
// instantiated, and then the node's bytes are; the capture is not invalidated. It failed on the
// H200 (run 5) for a reason the run did not record; the interposer now makes no ledger or pool
// call inside a capture.
TEST(InterposerPaths, AnAsyncAllocationInsideACaptureIsChargedAtInstantiation) {
  ledger::Limits l = Grant(16 * kMiB);
  l.compute_percent = 50;
  Task task(kDevice, l);
  auto p = task.Start({"capture-alloc", std::to_string(4 * kMiB)});
  EXPECT_EQ(p->ReadLine(), "capture rc=0 end rc=0 charged=0");
  EXPECT_EQ(p->ReadLine(), "replay rc=0 charged=" + std::to_string(4 * kMiB));
  EXPECT_EQ(p->Wait(), 0);
  // Past the grant, instantiation (not the capture) is refused.
  auto over = task.Start({"capture-alloc", std::to_string(16 * kMiB)});  // + its context
  EXPECT_EQ(over->ReadLine(), "capture rc=0 end rc=0 charged=0");
  EXPECT_EQ(over->ReadLine(), "replay rc=2 charged=0");
  EXPECT_EQ(over->Wait(), 0);
}

TEST(InterposerPaths, MemGetInfoShowsTheSlice) {
  Task task(kDevice, Grant(24 * kMiB));
  auto p = task.Start({"info"});
  EXPECT_EQ(p->ReadLine(),
            "rc=0 free=" + std::to_string(23 * kMiB) + " total=" + std::to_string(24 * kMiB));
  EXPECT_EQ(p->Wait(), 0);
}

// NVML inside the task shows the slice too; without the interposer, the device.
TEST(InterposerPaths, NvmlMemoryInfoShowsTheSlice) {
  Task task(kDevice, Grant(24 * kMiB));
  auto holder = task.Start({"alloc", "plain", std::to_string(5 * kMiB)});
  ASSERT_EQ(holder->ReadLine(), "rc=0");
  // The task holds 1 + 5 MiB (holder) and 1 MiB (the asking process's own context).
  auto p = task.Start({"nvml-info"});
  EXPECT_EQ(p->ReadLine(), "total=" + std::to_string(24 * kMiB) + " used=" +
                               std::to_string(7 * kMiB) + " free=" + std::to_string(17 * kMiB));
  EXPECT_EQ(p->Wait(), 0);
  auto native = task.Start({"nvml-info"}, /*preload=*/false);
  EXPECT_EQ(native->ReadLine(), "total=" + std::to_string(kDevice) +
                                    " used=" + std::to_string(7 * kMiB) +
                                    " free=" + std::to_string(kDevice - 7 * kMiB));
  EXPECT_EQ(native->Wait(), 0);
}

TEST(InterposerPaths, WithoutALedgerNothingRuns) {
  Task task(kDevice, Grant(24 * kMiB));
  std::vector<std::string> env = task.Env();
  for (auto& e : env)
    if (e.rfind("GPUPOOL_LEDGER_SOCKET=", 0) == 0) e = "GPUPOOL_LEDGER_SOCKET=/nonexistent/sock";
  Child c({GPUPOOL_PROBE, "info"}, env);
  EXPECT_EQ(c.ReadLine(), "setup rc=3");  // CUDA_ERROR_NOT_INITIALIZED: fails closed
  EXPECT_EQ(WEXITSTATUS(c.Wait()), 4);
}

TEST(InterposerPaths, AnUnknownDriverVersionIsRefused) {
  Task task(kDevice, Grant(24 * kMiB));
  for (const char* v : {"11020", "13010", "14000"}) {
    std::vector<std::string> env = task.Env();
    env.push_back(std::string("GPUPOOL_FAKE_CUDA_DRIVER_VERSION=") + v);
    Child c({GPUPOOL_PROBE, "info"}, env);
    EXPECT_EQ(c.ReadLine(), "setup rc=3") << v;  // CUDA_ERROR_NOT_INITIALIZED: fails closed
    EXPECT_EQ(WEXITSTATUS(c.Wait()), 4);
  }
}

// 8 processes × 4 threads allocate and free at random on every path against a 32 MiB grant on a
// 64 MiB device. The device's high-water mark (recorded by the fake at every allocation) never
// passes the grant; at quiescence the ledger equals the fake's truth to the byte, per process
// and in total; once they exit both are zero.
TEST(InterposerStorm, LiveMemoryNeverPassesTheGrantAndTheLedgerMatchesTheDriver) {
  constexpr uint64_t kGrant = 32 * kMiB;
  Task task(kDevice, Grant(kGrant));
  std::vector<std::unique_ptr<Child>> procs;
  unsigned seed = static_cast<unsigned>(time(nullptr));
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (unsigned i = 0; i < 8; ++i)
    procs.push_back(
        task.Start({"storm", std::to_string(seed + i), "4", "1500", std::to_string(3 * kMiB)}));
  // Every process holds its context before any storms (a late one could find the grant full).
  for (auto& p : procs) ASSERT_EQ(p->ReadLine(), "ready");
  for (auto& p : procs) p->Write("go\n");
  long oom = 0;
  for (auto& p : procs) {
    std::string counts = p->ReadUntil("counts", 25000);
    ASSERT_FALSE(counts.empty()) << "pid " << p->pid() << " status " << p->Wait();
    EXPECT_NE(counts.find("bad=0"), std::string::npos) << counts;
    oom += atol(counts.substr(counts.find("oom=") + 4).c_str());
    EXPECT_EQ(p->ReadLine(), "quiescent");
  }
  EXPECT_GT(oom, 0) << "the storm never pressed on the grant";
  fakecuda::Truth truth = task.Truth();
  ledger::Usage usage = task.ledger().Snapshot();
  EXPECT_LE(truth.high_water, kGrant);
  EXPECT_EQ(usage.vram, truth.used);
  for (auto& p : procs) EXPECT_EQ(LedgerVram(usage, p->pid()), truth.BytesOf(p->pid()));
  for (auto& p : procs) p->CloseStdin();
  for (auto& p : procs) EXPECT_EQ(WEXITSTATUS(p->Wait()), 0);
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().vram == 0; }, 2000));
  EXPECT_EQ(task.Truth().used, 0u);
}

// With a lease (each process holds up to 2 × 2 MiB reserved ahead of its allocations, so most
// allocations cost no round trip): one process still gets every byte of its grant and not one
// more, and in a storm the device never passes the grant; at quiescence the ledger holds the
// driver's figure plus at most each process's lease.
TEST(InterposerLease, OneProcessStillGetsItsGrantToTheByte) {
  for (const char* path : {"plain", "pool"}) {
    SCOPED_TRACE(path);
    ledger::Limits l = Grant(17 * kMiB);
    l.lease_bytes = 2 * kMiB;
    Task task(kDevice, l);
    auto fits = task.Start({"alloc", path, std::to_string(16 * kMiB)});
    EXPECT_EQ(fits->ReadLine(), "rc=0");
    EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), fits->pid()), 17 * kMiB);
    fits->CloseStdin();
    EXPECT_EQ(fits->Wait(), 0);
    auto refused = task.Start({"alloc", path, std::to_string(16 * kMiB + 1)});
    EXPECT_EQ(refused->ReadLine(), "rc=2");
    refused->CloseStdin();
    EXPECT_EQ(refused->Wait(), 0);
  }
}

TEST(InterposerLease, StormNeverPassesTheGrant) {
  constexpr uint64_t kGrant = 32 * kMiB, kLease = 2 * kMiB;
  ledger::Limits l = Grant(kGrant);
  l.lease_bytes = kLease;
  Task task(kDevice, l);
  std::vector<std::unique_ptr<Child>> procs;
  unsigned seed = static_cast<unsigned>(time(nullptr));
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (unsigned i = 0; i < 8; ++i)
    procs.push_back(
        task.Start({"storm", std::to_string(seed + i), "4", "1500", std::to_string(3 * kMiB)}));
  for (auto& p : procs) ASSERT_EQ(p->ReadLine(), "ready");
  for (auto& p : procs) p->Write("go\n");
  for (auto& p : procs) {
    std::string counts = p->ReadUntil("counts", 25000);
    ASSERT_FALSE(counts.empty()) << "pid " << p->pid() << " status " << p->Wait();
    EXPECT_NE(counts.find("bad=0"), std::string::npos) << counts;
    EXPECT_EQ(p->ReadLine(), "quiescent");
  }
  fakecuda::Truth truth = task.Truth();
  ledger::Usage usage = task.ledger().Snapshot();
  EXPECT_LE(truth.high_water, kGrant);
  for (auto& p : procs) {
    uint64_t charged = LedgerVram(usage, p->pid()), held = truth.BytesOf(p->pid());
    EXPECT_GE(charged, held);
    EXPECT_LE(charged - held, 2 * kLease);
  }
  for (auto& p : procs) p->CloseStdin();
  for (auto& p : procs) EXPECT_EQ(WEXITSTATUS(p->Wait()), 0);
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().vram == 0; }, 2000));
}

// A process killed with SIGKILL at a random point of its storm: its share is free in the ledger
// and in the driver within 1 s, and the others carry on within the grant.
TEST(InterposerStorm, KillNineFreesThatProcessShareWithinOneSecond) {
  constexpr uint64_t kGrant = 32 * kMiB;
  Task task(kDevice, Grant(kGrant));
  std::mt19937 rng(static_cast<unsigned>(time(nullptr)));
  std::vector<std::unique_ptr<Child>> procs;
  for (unsigned i = 0; i < 4; ++i)
    procs.push_back(
        task.Start({"storm", std::to_string(rng()), "4", "100000", std::to_string(3 * kMiB)}));
  for (auto& p : procs) ASSERT_EQ(p->ReadLine(), "ready");
  for (auto& p : procs) p->Write("go\n");
  // Wait until the victim holds something, then a random moment more.
  pid_t victim = procs[0]->pid();
  ASSERT_TRUE(Eventually([&] { return task.Truth().BytesOf(victim) > kMiB; }, 10000));
  std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
  procs[0]->Kill();
  uint64_t t0 = NowMs();
  bool freed = Eventually(
      [&] {
        return LedgerVram(task.ledger().Snapshot(), victim) == 0 &&
               task.Truth().BytesOf(victim) == 0;
      },
      1000);
  uint64_t took = NowMs() - t0;
  EXPECT_TRUE(freed) << "after " << took << " ms";
  EXPECT_EQ(WTERMSIG(procs[0]->Wait()), SIGKILL);
  for (size_t i = 1; i < procs.size(); ++i) procs[i]->Kill();
  for (size_t i = 1; i < procs.size(); ++i) procs[i]->Wait();
  EXPECT_LE(task.Truth().high_water, kGrant);
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().vram == 0; }, 1000));
}

// An IPC import maps another process's memory: no new device memory, but charged to the
// importing task, so its grant bounds what it can reach.
TEST(InterposerPaths, IpcImportsAreChargedToTheImporter) {
  Task task(kDevice, Grant(24 * kMiB));
  auto exporter = task.Start({"ipc-export", std::to_string(8 * kMiB)});
  std::string line = exporter->ReadLine();
  ASSERT_EQ(line.rfind("rc=0 handle=", 0), 0u) << line;
  std::string handle = line.substr(strlen("rc=0 handle="));
  auto importer = task.Start({"ipc-import", handle});
  EXPECT_EQ(importer->ReadLine(), "rc=0");
  EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), importer->pid()), 1 * kMiB + 8 * kMiB);
  EXPECT_EQ(task.Truth().BytesOf(importer->pid()), 1 * kMiB);
  // A third process: 9 + 9 + 1 + 8 > 24.
  auto refused = task.Start({"ipc-import", handle});
  EXPECT_EQ(refused->ReadLine(), "rc=2");
  importer->CloseStdin();
  EXPECT_EQ(importer->Wait(), 0);
  pid_t pid = importer->pid();
  EXPECT_TRUE(Eventually([&] { return LedgerVram(task.ledger().Snapshot(), pid) == 0; }, 1000));
}

// Spill: a 32 MiB grant plus 32 MiB of spill on a 64 MiB device, no context charge. 64 plain
// allocations of 1 MiB succeed (32 on the device, 32 in mapped host memory), one byte more fails,
// and the ledger counts the spilled bytes; freeing gives both back.
TEST(InterposerSpill, PlainAllocationsSpillPastTheGrantUpToTheSpill) {
  Task task(kDevice, Grant(32 * kMiB, 32 * kMiB), /*context_bytes=*/0);
  auto p = task.Start({"spill", "64", std::to_string(kMiB)});
  for (int i = 0; i < 64; ++i) ASSERT_EQ(p->ReadLine(), "rc=0") << i;
  ledger::Usage u = task.ledger().Snapshot();
  EXPECT_EQ(u.vram, 32 * kMiB);
  EXPECT_EQ(u.spill, 32 * kMiB);
  EXPECT_EQ(task.Truth().BytesOf(p->pid()), 32 * kMiB);  // the device holds only the VRAM part
  auto one_more = task.Start({"spill", "1", "1"});
  EXPECT_EQ(one_more->ReadLine(), "rc=2");
  one_more->CloseStdin();
  one_more->Wait();
  // Spill is metered over time from the bytes actually spilled.
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().spill_byte_seconds > 0; }, 3000));
  p->CloseStdin();
  EXPECT_EQ(WEXITSTATUS(p->Wait()), 0);
  u = task.ledger().Snapshot();
  EXPECT_EQ(u.vram, 0u);
  EXPECT_EQ(u.spill, 0u);
}

}  // namespace
}  // namespace gpupool::interposer_test
