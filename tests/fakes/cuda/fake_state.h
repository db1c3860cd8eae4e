// fake_state.h — the fake CUDA driver's device truth, shared by every process that loads the fake
// (a real GPU's memory is one pool for all processes). One file per device under the directory
// named by GPUPOOL_FAKE_CUDA_STATE, mapped MAP_SHARED; a robust process-shared mutex guards it,
// so a process killed while holding it does not wedge the device.
//
// What a real driver does and this file models:
//  - every byte of device memory is charged to the process that allocated it (NVML's
//    per-process "used GPU memory"); `used` is the device's sum, `high_water` its maximum;
//  - a process's memory is freed when the process ends (the kernel driver drops its contexts
//    when its file descriptors close). The fake cannot run code at a kill -9, so whoever reads
//    or allocates first reaps dead owners (pid gone or a zombie, start time checked against pid
//    reuse) before answering;
//  - the device runs one context's kernels at a time and time-slices between the contexts of
//    all processes, as a GPU without MPS does (the engine_* fields and `waiters`; fake_engine.cc).
//    The resident context keeps the device while no other context waits; once one waits and the
//    resident one has had the device for a timeslice, it is preempted, in the middle of a kernel
//    if one runs, and the rest of that kernel runs at its context's next turn. Waiting contexts
//    take turns in order of arrival (`ticket`), a preempted one behind those already waiting. An
//    H200 with driver 580 did so with a ~2.26 ms timeslice (docs/interposer.md, "The fakes").
//    Between its kernels the resident context keeps the device for a short while
//    (`engine_until_ns`), as a GPU keeps a context whose next work is already queued; a context
//    that stays idle loses it then. `busy_ns` per process is the time its kernels ran, not the
//    time they waited preempted;
//  - device memory holds what was written to it, and keeps it after it is freed: cuMemAlloc's
//    reference says "The memory is not cleared", so the next process handed those pages reads
//    the last owner's bytes until someone zeroes them (what the agent's VRAM scrub is for). The
//    contents live in a second file per device, `device<N>.vram` (sparse, `total` bytes, mapped
//    MAP_SHARED by every process), in pages of kPageBytes; `page_owner` says which process
//    holds each page. Devices up to kMaxPages pages are backed (the tests' small ones); larger
//    ones are accounted only, and copies to or from them are refused.
// Header-only so the fake NVML and tests read the same truth without linking the fake driver.
#ifndef GPUPOOL_TESTS_FAKES_CUDA_FAKE_STATE_H_
#define GPUPOOL_TESTS_FAKES_CUDA_FAKE_STATE_H_

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gpupool::fakecuda {

inline constexpr uint64_t kMagic = 0x67707570636f6464ULL;  // "gpupcodc": with the engine's queue
inline constexpr int kMaxProcs = 512;
inline constexpr int kMaxWaiters = 256;  // threads waiting for the engine, all processes together
inline constexpr uint64_t kPageBytes = 64 << 10;
inline constexpr int kMaxPages = 16384;  // backs devices of up to 1 GiB

struct ProcEntry {
  int32_t pid;  // 0: free slot
  uint32_t pad;
  uint64_t start_time;  // /proc/<pid>/stat field 22, to tell a reused pid apart
  uint64_t bytes;       // device memory held now
  uint64_t busy_ns;     // GPU time its kernels ran (not the time they spent preempted)
  uint64_t kernels;
};

// A thread waiting for the engine on behalf of its context.
struct Waiter {
  int32_t pid;  // 0: free slot
  uint32_t pad;
  uint64_t ctx;
  uint64_t ticket;    // order of arrival: the smallest goes next
  uint64_t since_ns;  // CLOCK_MONOTONIC: when it began to wait
};

struct DeviceState {
  uint64_t magic;
  pthread_mutex_t mu;      // guards the memory and per-process figures
  pthread_mutex_t engine;  // guards the engine_* fields and waiters; held briefly, never while a
                           // kernel runs (its thread sleeps on engine_seq)
  uint64_t total;
  uint64_t used;
  uint64_t high_water;
  uint64_t oom_refusals;
  int32_t engine_pid;       // the resident context (pid, context id); 0: none
  uint32_t engine_running;  // 1 while the resident context's kernel runs
  uint64_t engine_ctx;
  uint64_t engine_until_ns;  // CLOCK_MONOTONIC: until then the resident context's next kernel
                             // goes first, though it runs none now
  uint64_t engine_slice_ns;  // when the resident context got the device
  // When the device was last free for the next context: the end of the resident context's last
  // kernel, or its preemption. A real GPU switches then; the fake's next context starts as of
  // then too (its thread's wake-up latency is the host's, not device time).
  uint64_t engine_free_ns;
  uint32_t engine_seq;       // a futex word, bumped when the engine changes hands or is wanted
  uint32_t engine_sleepers;  // threads sleeping on engine_seq
  uint32_t engine_waiting;   // waiters in use
  uint32_t pad2;
  uint64_t engine_next_ticket;
  Waiter waiters[kMaxWaiters];
  ProcEntry procs[kMaxProcs];
  int32_t page_owner[kMaxPages];  // the pid holding each page of a backed device; 0: free
};

// Whether the device's memory has contents (fits kMaxPages pages).
inline bool Backed(const DeviceState* s) { return s->total <= kPageBytes * kMaxPages; }

// The UUID the fake gives device `index` (cuDeviceGetUuid):
// "GPU-67706675-6b65-0000-0000-0000000000NN".
// MIG instances (GPUPOOL_FAKE_CUDA_DEVICES items "mig:…") keep their truth at kMigBase + k, out
// of the whole GPUs' contiguous range that the fake NVML counts, and have "MIG-" UUIDs.
constexpr int kMigBase = 1000;
inline bool IsMig(int index) { return index >= kMigBase; }

inline void FakeUuidBytes(int index, unsigned char out[16]) {
  const unsigned char base[16] = {'g', 'p', 'f', 'u', 'k', 'e', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(out, base, 16);
  if (IsMig(index)) out[6] = 'm';
  out[14] = static_cast<unsigned char>(index >> 8);
  out[15] = static_cast<unsigned char>(index);
}
inline std::string FakeUuid(int index) {
  unsigned char b[16];
  FakeUuidBytes(index, b);
  char s[64];
  std::snprintf(s, sizeof s,
                "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                IsMig(index) ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
                b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

// The start time of `pid`, 0 if it is gone or a zombie (already exited: its memory is freed).
inline uint64_t ProcStartTime(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // comm may hold spaces and parentheses
  if (p == nullptr || p[1] != ' ') return 0;
  p += 2;  // field 3: state
  if (*p == 'Z' || *p == 'X') return 0;
  for (int field = 3; field < 22 && p != nullptr; ++field) {
    p = std::strchr(p, ' ');
    if (p != nullptr) ++p;
  }
  return p == nullptr ? 0 : std::strtoull(p, nullptr, 10);
}

inline void Lock(pthread_mutex_t* m) {
  if (pthread_mutex_lock(m) == EOWNERDEAD) pthread_mutex_consistent(m);
}

// REQUIRES: s->mu held. Frees the memory of processes that have ended.
inline void ReapLocked(DeviceState* s) {
  for (ProcEntry& e : s->procs) {
    if (e.pid == 0) continue;
    if (ProcStartTime(e.pid) == e.start_time) continue;
    s->used -= e.bytes;
    // Its pages are free again; what it wrote stays in them.
    for (int32_t& owner : s->page_owner) {
      if (owner == e.pid) owner = 0;
    }
    e = ProcEntry{};
  }
}

// REQUIRES: s->mu held. The slot of `pid`, created when `create`.
inline ProcEntry* FindLocked(DeviceState* s, int pid, bool create) {
  ProcEntry* free_slot = nullptr;
  for (ProcEntry& e : s->procs) {
    if (e.pid == pid) return &e;
    if (e.pid == 0 && free_slot == nullptr) free_slot = &e;
  }
  if (!create) return nullptr;
  if (free_slot == nullptr) {
    ReapLocked(s);
    for (ProcEntry& e : s->procs)
      if (e.pid == 0) free_slot = &e;
    if (free_slot == nullptr) return nullptr;
  }
  *free_slot = ProcEntry{};
  free_slot->pid = pid;
  free_slot->start_time = ProcStartTime(pid);
  return free_slot;
}

// Maps device `index`'s state under `dir`, creating it with `total` bytes if `total` != 0.
// Returns nullptr when it does not exist (and total == 0) or cannot be mapped.
inline DeviceState* MapDevice(const char* dir, int index, uint64_t total) {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/device%d", dir, index);
  int fd = ::open(path, O_RDWR | O_CLOEXEC | (total != 0 ? O_CREAT : 0), 0666);
  if (fd < 0) return nullptr;
  ::flock(fd, LOCK_EX);
  struct stat st {};
  ::fstat(fd, &st);
  bool fresh = st.st_size < static_cast<off_t>(sizeof(DeviceState));
  if (fresh && (total == 0 || ::ftruncate(fd, sizeof(DeviceState)) != 0)) {
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, sizeof(DeviceState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return nullptr;
  }
  auto* s = static_cast<DeviceState*>(p);
  if (s->magic != kMagic) {
    std::memset(s, 0, sizeof *s);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->mu, &a);
    pthread_mutex_init(&s->engine, &a);
    pthread_mutexattr_destroy(&a);
    s->total = total;
    __atomic_store_n(&s->magic, kMagic, __ATOMIC_RELEASE);
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return s;
}

// A consistent copy of the truth after reaping dead processes (for tests and the fake NVML).
struct Truth {
  uint64_t total, used, high_water, oom_refusals;
  ProcEntry procs[kMaxProcs];
  uint64_t BytesOf(int pid) const {
    for (const ProcEntry& e : procs)
      if (e.pid == pid) return e.bytes;
    return 0;
  }
};
inline bool ReadTruth(const char* dir, int index, Truth* out) {
  DeviceState* s = MapDevice(dir, index, 0);
  if (s == nullptr) return false;
  Lock(&s->mu);
  ReapLocked(s);
  out->total = s->total;
  out->used = s->used;
  out->high_water = s->high_water;
  out->oom_refusals = s->oom_refusals;
  std::memcpy(out->procs, s->procs, sizeof s->procs);
  pthread_mutex_unlock(&s->mu);
  ::munmap(s, sizeof *s);
  return true;
}

}  // namespace gpupool::fakecuda

#endif  // GPUPOOL_TESTS_FAKES_CUDA_FAKE_STATE_H_
