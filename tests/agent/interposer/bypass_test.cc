// The bypass suite: every way around the interposer we know, and the defence that holds for
// each. In-process (dlopen by path, dlsym through a handle, unlisted cuGetProcAddress names,
// forged ledger frames, fork) the interposer itself refuses; where it cannot (no LD_PRELOAD, an
// unhooked entry point called directly) the agent's watchdog, reading per-process memory through
// NVML (the fake NVML over the fake driver's truth), kills the process. Each test measures, from
// the fake's truth sampled every 2 ms, the longest time the task held more than its grant: never
// more than 1 s.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>

#include "agent/interposer/watchdog/watchdog.h"
#include "tests/agent/interposer/harness.h"

namespace gpupool::interposer_test {
namespace {

constexpr uint64_t kDevice = 64 * kMiB;
constexpr uint64_t kGrant = 16 * kMiB;

// The agent's watchdog for one task, ticking every 100 ms on a thread.
class WatchdogRunner {
 public:
  explicit WatchdogRunner(Task* task) {
    setenv("GPUPOOL_FAKE_CUDA_STATE", task->state_dir().c_str(), 1);
    std::string error;
    nvml_ = watchdog::NvmlProcessMemory::Open(GPUPOOL_FAKE_NVML_LIB, &error);
    if (nvml_ == nullptr) abort();
    watchdog::Options o;
    o.vram_grant = task->ledger().limits().vram;
    pid_t self = getpid();
    o.in_task = [self](pid_t pid) { return pid != self && watchdog::IsDescendant(pid, self); };
    o.ledger = [task] { return task->ledger().Snapshot(); };
    o.reconcile = [task](pid_t pid, uint64_t bytes) {
      return task->ledger().ReconcileDriverMemory(pid, bytes);
    };
    dog_ = std::make_unique<watchdog::Watchdog>(nvml_.get(), o);
    thread_ = std::thread([this] {
      while (!stop_) {
        for (auto& v : dog_->Tick()) {
          std::lock_guard<std::mutex> l(mu_);
          verdicts_.push_back(v);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~WatchdogRunner() {
    stop_ = true;
    thread_.join();
  }
  std::vector<watchdog::Verdict> verdicts() {
    std::lock_guard<std::mutex> l(mu_);
    return verdicts_;
  }

 private:
  std::unique_ptr<watchdog::NvmlProcessMemory> nvml_;
  std::unique_ptr<watchdog::Watchdog> dog_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<watchdog::Verdict> verdicts_;
};

// The longest stretch during which the device held more than the grant, sampled every 2 ms.
class OverGrantMonitor {
 public:
  OverGrantMonitor(Task* task, uint64_t grant) {
    thread_ = std::thread([this, task, grant] {
      uint64_t since = 0;
      while (!stop_) {
        uint64_t now = NowMs();
        if (task->Truth().used > grant) {
          if (since == 0) since = now;
          longest_ = std::max<uint64_t>(longest_, now - since);
          seen_ = true;
        } else {
          since = 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~OverGrantMonitor() { Stop(); }
  void Stop() {
    if (!stop_.exchange(true)) thread_.join();
  }
  uint64_t longest_ms() const { return longest_; }
  bool seen() const { return seen_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> longest_{0};
  std::atomic<bool> seen_{false};
  std::thread thread_;
};

ledger::Limits Grant() {
  ledger::Limits l;
  l.vram = kGrant;
  return l;
}

// A child started without LD_PRELOAD allocates twice its task's grant straight from the driver:
// the watchdog sees memory the ledger never charged and kills it within 1 s.
TEST(Bypass, NoPreloadIsKilledByTheWatchdogWithinOneSecond) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  OverGrantMonitor over(&task, kGrant);
  auto c = task.Start({"alloc", "plain", std::to_string(2 * kGrant)}, /*preload=*/false);
  EXPECT_EQ(c->ReadLine(), "rc=0");  // nothing in the process stops it
  int st = c->Wait();
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  ASSERT_TRUE(Eventually([&] { return task.Truth().used == 0; }, 1000));
  over.Stop();
  EXPECT_TRUE(over.seen());
  EXPECT_LE(over.longest_ms(), 1000u);
  auto v = dog.verdicts();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].pid, c->pid());
  EXPECT_NE(v[0].reason.find("bypassed the interposer"), std::string::npos) << v[0].reason;
}

// Even within the grant, memory the ledger does not know of is a bypass (it would let the task's
// other processes pass the grant).
TEST(Bypass, UncountedMemoryWithinTheGrantIsKilledToo) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  auto c = task.Start({"alloc", "plain", std::to_string(4 * kMiB)}, /*preload=*/false);
  EXPECT_EQ(c->ReadLine(), "rc=0");
  int st = c->Wait();
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
}

// Memory the driver holds for a process of the task that no allocation call named — its context
// here, which the ledger was not told to charge (gpu_slices.context_mib: 0; a real context held
// 520 MiB on driver 580, and the watchdog read every task's context as a bypass and killed it):
// the watchdog charges it to the process instead of killing it, and what is left of the grant
// for allocations shrinks by it, to the byte.
TEST(Bypass, DriverMemoryTheLedgerWasNotToldOfIsChargedNotKilled) {
  Task task(kDevice, Grant(), kMiB, nullptr, nullptr, /*charge_contexts=*/false);
  WatchdogRunner dog(&task);
  std::string go = task.dir() + "/go";
  auto p = task.Start({"alloc-across", go, std::to_string(kGrant - 2 * kMiB),
                       std::to_string(kMiB + 1), std::to_string(kMiB)});
  EXPECT_EQ(p->ReadLine(), "rc=0");
  // The fake holds its 1 MiB context too; the watchdog adds it to the ledger's charge.
  EXPECT_TRUE(Eventually(
      [&] { return LedgerVram(task.ledger().Snapshot(), p->pid()) == kGrant - kMiB; }, 2000));
  FILE* f = fopen(go.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  EXPECT_EQ(p->ReadLine(), "rc=2");  // would have fitted without the context's charge
  EXPECT_EQ(p->ReadLine(), "rc=0");  // the grant's last MiB
  EXPECT_EQ(WEXITSTATUS(p->Wait()), 0);
  EXPECT_TRUE(dog.verdicts().empty());
  EXPECT_LE(task.Truth().high_water, kGrant);
  // The charge ends with the process.
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().vram == 0; }, 2000));
}

// An allocating entry point the interposer does not hook, linked directly: the driver allocates,
// the watchdog kills.
TEST(Bypass, UnhookedEntryPointCalledDirectlyIsKilledWithinOneSecond) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  OverGrantMonitor over(&task, kGrant);
  auto c = task.Start({"array3d", std::to_string(2 * kGrant)});
  EXPECT_EQ(c->ReadLine(), "rc=0");
  int st = c->Wait();
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  ASSERT_TRUE(Eventually([&] { return task.Truth().used == 0; }, 1000));
  over.Stop();
  EXPECT_LE(over.longest_ms(), 1000u);
}

// dlopen of the driver by absolute path — the very file, or a copy the dynamic linker sees as
// another library — with every entry point taken through dlsym(handle): the hooks answer.
TEST(Bypass, DlopenByAbsolutePathAndDlsymThroughTheHandleGetTheHooks) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  std::string copy = task.dir() + "/libcuda-copy.so.1";
  {
    std::ifstream in(GPUPOOL_FAKE_CUDA_LIB, std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  for (const std::string& lib : {std::string(GPUPOOL_FAKE_CUDA_LIB), copy}) {
    SCOPED_TRACE(lib);
    auto over = task.Start({"dlopen", lib, std::to_string(kGrant)});
    EXPECT_EQ(over->ReadLine(), "rc=2");
    over->CloseStdin();
    over->Wait();
    auto fits = task.Start({"dlopen", lib, std::to_string(kGrant - kMiB)});
    EXPECT_EQ(fits->ReadLine(), "rc=0");
    EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), fits->pid()), kGrant);
    EXPECT_EQ(task.Truth().BytesOf(fits->pid()), kGrant);
    fits->CloseStdin();
    fits->Wait();
  }
  EXPECT_LE(task.Truth().high_water, kGrant);
  EXPECT_TRUE(dog.verdicts().empty());
}

// cuGetProcAddress with the base name, the per-thread-stream flag, and an ABI name the
// interposer does not list: each hands out the hook (matched by the driver's pointer, not the
// name). An allocating entry point the interposer does not hook is not handed out at all.
TEST(Bypass, ProcAddressNeverHandsOutAnUnhookedAllocator) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  struct Case {
    const char* name;
    const char* flags;
    const char* expect;
  } cases[] = {
      {"cuMemAlloc", "0", "rc=2"},
      {"cuMemAlloc", "2", "rc=2"},
      {"cuMemAlloc_v2", "0", "rc=2"},
      {"cuArray3DCreate", "0", "rc=500 notfound status=1"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.name) + " flags " + k.flags);
    auto p = task.Start({"getproc", k.name, k.flags, std::to_string(kGrant)});
    EXPECT_EQ(p->ReadLine(), k.expect);
  }
  EXPECT_LE(task.Truth().high_water, kGrant);
  EXPECT_TRUE(dog.verdicts().empty());
}

// A driver whose cuGetProcAddress hands out pointers that are not its exported symbols: the
// interposer cannot tell the allocator is one it hooks, so it refuses to hand it out (fails
// closed) rather than let an unhooked allocator through.
TEST(Bypass, AnUnrecognisedAllocatorPointerIsNotHandedOut) {
  Task task(kDevice, Grant());
  std::vector<std::string> env = task.Env();
  env.push_back("GPUPOOL_FAKE_CUDA_PROC_THUNKS=1");
  Child c({GPUPOOL_PROBE, "getproc", "cuMemAlloc", "0", std::to_string(2 * kGrant)}, env);
  EXPECT_EQ(c.ReadLine(), "rc=500 notfound status=1");
  c.CloseStdin();
  EXPECT_EQ(c.Wait(), 0);
  // Natively the thunk allocates, as the driver would.
  std::vector<std::string> native;
  for (const auto& e : env)
    if (e.rfind("LD_PRELOAD=", 0) != 0) native.push_back(e);
  Child n({GPUPOOL_PROBE, "getproc", "cuMemAlloc", "0", std::to_string(kMiB)}, native);
  EXPECT_EQ(n.ReadLine(), "rc=0");
  n.CloseStdin();
  EXPECT_EQ(n.Wait(), 0);
}

// A task's process writes to its ledger: the socket file refuses a write as a file; frames out
// of order, unknown, malformed or overflowing are refused; releasing what it does not hold
// releases nothing; dropping a connection that holds a charge keeps the charge until the process
// ends. The grant still holds afterwards.
TEST(Bypass, ForgedLedgerFramesChangeNothing) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  auto p = task.Start({"forge", std::to_string(kGrant - kMiB - 4096 + 1)});
  const char* expect[] = {
      "fopen=refused", "reserve-before-hello=2", "hello=0",        "release-unheld=3",
      "reserve-max=1", "reserve-spill-max=1",    "unknown-op=2",   "bad-kind=2",
      "short-frame=2", "long-frame=2",           "reserve-held=0", "rc=2"};
  for (const char* e : expect) EXPECT_EQ(p->ReadLine(), e);
  ledger::Usage u = task.ledger().Snapshot();
  EXPECT_EQ(u.vram, kMiB + 4096);    // its context and the orphaned 4096 bytes
  EXPECT_EQ(u.protocol_errors, 6u);  // the six malformed frames above
  p->CloseStdin();
  EXPECT_EQ(p->Wait(), 0);
  EXPECT_TRUE(Eventually([&] { return task.ledger().Snapshot().vram == 0; }, 1000));
  EXPECT_TRUE(dog.verdicts().empty());
}

// A fork storm: a process holding a context, memory and a ledger connection forks 16 children
// that exec a CUDA program allocating 3 MiB with a context of its own. Each child is charged on
// its own connection (not its parent's), and together they fit the grant: 16 MiB − 1 MiB − 4 KiB
// leaves room for at most three children of 1 + 3 MiB (fewer when refused children hold their
// contexts at the time).
TEST(Bypass, ForkStormStaysWithinTheGrant) {
  Task task(kDevice, Grant());
  WatchdogRunner dog(&task);
  auto p = task.Start({"fork", "16", std::to_string(3 * kMiB)});
  int ok = 0, refused = 0;
  for (int i = 0; i < 16; ++i) {
    std::string l = p->ReadLine();
    if (l == "rc=0") ++ok;
    if (l == "rc=2" || l == "setup rc=2") ++refused;  // refused its memory or its context
  }
  EXPECT_GE(ok, 1);
  EXPECT_LE(ok, 3);
  EXPECT_EQ(ok + refused, 16);
  EXPECT_EQ(LedgerVram(task.ledger().Snapshot(), p->pid()), kMiB + 4096);
  fakecuda::Truth t = task.Truth();
  EXPECT_LE(t.high_water, kGrant);
  EXPECT_EQ(task.ledger().Snapshot().vram, t.used);
  p->CloseStdin();
  EXPECT_EQ(p->Wait(), 0);
  EXPECT_TRUE(dog.verdicts().empty());
}

}  // namespace
}  // namespace gpupool::interposer_test
