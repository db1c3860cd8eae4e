// The fake driver: the device's engine. One context's kernels run at a time, and contexts of any
// process time-slice as on a GPU without MPS (fake_state.h): the resident context keeps the
// device while nobody else waits or while its timeslice lasts; then it is preempted, in the
// middle of a kernel if need be, and the waiting contexts take turns in order of arrival. A
// kernel "runs" while its thread sleeps on the device's futex word, so a context that starts
// waiting wakes the runner, which then yields at the end of its slice.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

namespace {

using gpupool::fakecuda::Waiter;

// GPUPOOL_FAKE_CUDA_TIMESLICE_US: how long the resident context may keep the device while another
// waits. 2 ms by default: on an H200 with driver 580 (no MPS) two contexts busy with 1 ms
// kernels switched every ~2.26 ms (docs/benchmarks.md, "GPU runs").
uint64_t TimesliceNs() {
  // At least 100 µs: contexts that preempt each other faster than their threads wake would
  // hardly move on.
  static const uint64_t ns =
      std::max<uint64_t>(EnvU64("GPUPOOL_FAKE_CUDA_TIMESLICE_US", 2000), 100) * 1000;
  return ns;
}

// A thread that waits this long and sees nothing change looks for ended processes among the
// resident context and the waiters: a process killed by SIGKILL cannot give the device back.
constexpr uint64_t kLivenessNs = 10'000'000;

bool IsResident(const DeviceState* s, int32_t pid, uint64_t ctx) {
  return s->engine_pid == pid && s->engine_ctx == ctx;
}

// REQUIRES: s->engine. Whether a context other than the resident one waits for the device.
bool OthersWaitLocked(const DeviceState* s) {
  if (s->engine_waiting == 0) return false;
  for (const Waiter& w : s->waiters)
    if (w.pid != 0 && !IsResident(s, w.pid, w.ctx)) return true;
  return false;
}

// REQUIRES: s->engine. The waiter whose turn is next: the earliest of the other contexts'.
const Waiter* HeadLocked(const DeviceState* s) {
  const Waiter* head = nullptr;
  for (const Waiter& w : s->waiters)
    if (w.pid != 0 && !IsResident(s, w.pid, w.ctx) && (head == nullptr || w.ticket < head->ticket))
      head = &w;
  return head;
}

// REQUIRES: s->engine. Something a sleeping thread may be waiting for changed: wakes them all
// (they each look at the engine again once this thread unlocks it).
void ChangedLocked(DeviceState* s) {
  __atomic_add_fetch(&s->engine_seq, 1, __ATOMIC_SEQ_CST);
  // Not FUTEX_PRIVATE: the word is in a file every process maps.
  if (s->engine_sleepers != 0)
    syscall(SYS_futex, &s->engine_seq, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// REQUIRES: s->engine, which it releases while it sleeps: up to `ns`, or until the engine
// changes. Whether it changed.
bool SleepLocked(DeviceState* s, uint64_t ns) {
  const uint32_t seen = s->engine_seq;
  ++s->engine_sleepers;
  pthread_mutex_unlock(&s->engine);
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  syscall(SYS_futex, &s->engine_seq, FUTEX_WAIT, seen, &ts, nullptr, 0);
  gpupool::fakecuda::Lock(&s->engine);
  --s->engine_sleepers;
  return s->engine_seq != seen;
}

// REQUIRES: s->engine. Drops waiters and a resident context whose process has ended.
void ReapEngineLocked(DeviceState* s) {
  for (Waiter& w : s->waiters) {
    if (w.pid != 0 && gpupool::fakecuda::ProcStartTime(w.pid) == 0) {
      w = Waiter{};
      --s->engine_waiting;
    }
  }
  if (s->engine_pid != 0 && gpupool::fakecuda::ProcStartTime(s->engine_pid) == 0) {
    s->engine_pid = 0;
    s->engine_ctx = 0;
    s->engine_running = 0;
    s->engine_free_ns = NowNs();
  }
}

// REQUIRES: s->engine (released while it waits). Returns when the calling context may run its
// kernel: it is then the resident context and the engine is marked running. Returns the moment
// its kernel starts on the device: now for the resident context; for one that waited, when the
// device became free for it (engine_free_ns) or it began to wait, whichever is later — the
// device switches at once, and the time its thread took to wake is the host's. The context's
// events that waited for the device are stamped then.
uint64_t TakeEngineLocked(DeviceState* s, int32_t pid, uint64_t ctx) {
  const uint64_t slice = TimesliceNs();
  Waiter* queued = nullptr;
  uint64_t quiet_since = NowNs();
  uint64_t now = quiet_since;
  uint64_t start = 0;  // 0: now (it did not wait for another context)
  for (;;) {
    now = NowNs();
    const bool slice_over = now >= s->engine_slice_ns + slice;
    if (IsResident(s, pid, ctx) && s->engine_running == 0) {
      if (!(slice_over && OthersWaitLocked(s))) break;  // still its turn
      // Its timeslice is over and another context waits: to the back of the queue.
      s->engine_pid = 0;
      s->engine_ctx = 0;
      s->engine_free_ns = now;
      ChangedLocked(s);
    }
    if (!IsResident(s, pid, ctx)) {
      for (Waiter& w : s->waiters) {
        if (queued != nullptr) break;
        if (w.pid != 0) continue;
        w = Waiter{pid, 0, ctx, s->engine_next_ticket++, now};
        ++s->engine_waiting;
        queued = &w;
        ChangedLocked(s);  // the resident context's kernel now has a slice to end
      }
      // The device is free for the next in line when nobody holds it, when the resident context
      // runs no kernel and has no more queued, or when its slice is over (between its kernels).
      const bool free = s->engine_pid == 0 ||
                        (s->engine_running == 0 && (now >= s->engine_until_ns || slice_over));
      if (free && queued != nullptr && HeadLocked(s) == queued) {
        start = std::min(now, std::max(s->engine_free_ns, queued->since_ns));
        *queued = Waiter{};
        --s->engine_waiting;
        queued = nullptr;
        s->engine_pid = pid;
        s->engine_ctx = ctx;
        s->engine_slice_ns = start;
        break;
      }
    }
    // Wait for a change, or until the resident context idles past its queued work or its slice.
    uint64_t wait = kLivenessNs;
    if (s->engine_pid != 0 && s->engine_running == 0 && !IsResident(s, pid, ctx)) {
      const uint64_t at = std::min(s->engine_until_ns, s->engine_slice_ns + slice);
      if (at > now) wait = std::min(at - now, kLivenessNs);
    }
    if (SleepLocked(s, wait)) {
      quiet_since = NowNs();
    } else if (NowNs() - quiet_since >= kLivenessNs) {
      ReapEngineLocked(s);
      quiet_since = NowNs();
    }
  }
  if (queued != nullptr) {  // taken as the resident context's other thread
    *queued = Waiter{};
    --s->engine_waiting;
  }
  s->engine_running = 1;
  if (start == 0) start = now;
  if (auto* c = reinterpret_cast<Ctx*>(ctx)) {  // its events recorded while it lacked the device
    std::lock_guard<std::mutex> l(g_mu);
    for (Event* e : c->pending) e->stamp_ns = std::max(start, e->recorded_ns);
    c->pending.clear();
  }
  return start;
}

// The time a kernel ran on the device, for the process's truth; `done`: it ended.
void Account(DeviceState* s, uint64_t ran_ns, bool done) {
  gpupool::fakecuda::Lock(&s->mu);
  if (auto* e = gpupool::fakecuda::FindLocked(s, getpid(), true)) {
    e->busy_ns += ran_ns;
    if (done) ++e->kernels;
  }
  pthread_mutex_unlock(&s->mu);
}

}  // namespace

void gpupool::fakecuda::driver::RunKernel(CUfunction f) {
  uint64_t remaining = reinterpret_cast<Function*>(f)->duration_ns;
  DeviceState* s = g_devs[std::max(CurrentDev(), 0)];
  const int32_t pid = getpid();
  const auto ctx = reinterpret_cast<uint64_t>(t_ctx);
  const uint64_t slice = TimesliceNs();
  for (;;) {
    gpupool::fakecuda::Lock(&s->engine);
    const uint64_t t0 = TakeEngineLocked(s, pid, ctx);
    uint64_t now = NowNs();
    bool preempted = false;
    for (;;) {
      if (now - t0 >= remaining) break;
      const bool contended = OthersWaitLocked(s);
      const uint64_t slice_end = s->engine_slice_ns + slice;
      if (contended && now >= slice_end) {
        preempted = true;
        break;
      }
      uint64_t until = t0 + remaining;
      if (contended) until = std::min(until, slice_end);
      SleepLocked(s, until - now);
      now = NowNs();
    }
    const uint64_t ran = now - t0;
    s->engine_running = 0;
    s->engine_free_ns = now;
    if (preempted) {
      // The device goes to the next waiting context; the rest of this kernel waits its turn.
      s->engine_pid = 0;
      s->engine_ctx = 0;
      remaining -= std::min(ran, remaining);
    } else {
      // Its next kernel (a synchronous stream: the host is about to queue it) goes first for a
      // while; if none comes, a waiting context takes the device then.
      s->engine_until_ns = now + kQueuedWorkNs;
    }
    ChangedLocked(s);
    pthread_mutex_unlock(&s->engine);
    Account(s, ran, !preempted);
    if (!preempted) break;
  }
  if (auto* c = reinterpret_cast<Ctx*>(t_ctx)) c->just_ran = true;
}

// Whether the current context is the resident one with no kernel running: then an event it
// records is processed at once. An event it records that is not the marker right after its
// kernel (the "end" of that kernel) precedes more work: the context keeps the device for it.
bool gpupool::fakecuda::driver::ResidentNow() {
  DeviceState* s = g_devs[CurrentDev()];
  auto* c = reinterpret_cast<Ctx*>(t_ctx);
  gpupool::fakecuda::Lock(&s->engine);
  const bool mine =
      IsResident(s, getpid(), reinterpret_cast<uint64_t>(t_ctx)) && s->engine_running == 0;
  if (mine && !c->just_ran)
    s->engine_until_ns = std::max(s->engine_until_ns, NowNs() + kQueuedWorkNs);
  c->just_ran = false;
  pthread_mutex_unlock(&s->engine);
  return mine;
}
