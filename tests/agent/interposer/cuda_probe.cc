// cuda_probe — a CUDA program for the interposer's tests, linked against (fake) libcuda.so.1 and
// run as a child process, with or without the interposer preloaded. It prints one line per
// result ("rc=<CUresult>", "quiescent", counts…) and, where it holds memory, holds it until its
// stdin reaches EOF. Modes:
//   alloc PATH BYTES          one allocation of BYTES on PATH (plain pitch managed array vmm
//                             pool async graph), then hold
//   info                      cuMemGetInfo as free=… total=…
//   storm SEED THREADS ITERS MAXBYTES   random allocate/free on every path, then hold
//   dlopen LIBPATH BYTES      the driver by absolute path, entry points through dlsym(handle)
//   getproc NAME FLAGS BYTES  an allocation entry point from cuGetProcAddress_v2(NAME)
//   runtime BYTES             every entry point from cuGetProcAddress_v2, as the CUDA runtime
//   fork N BYTES              N children that each allocate BYTES (plain) and hold
//   forge BYTES               hostile frames to the ledger socket, then cuMemAlloc(BYTES)
//   ipc-export BYTES / ipc-import HEX   IPC across two probes
//   spill N BYTES             N plain allocations of BYTES, then hold
//   nvml-info                 nvmlDeviceGetMemoryInfo through dlopen + dlsym
//   compute KIND SECONDS      ~1 ms kernels of work back to back (plain plain-ptsz ex coop
//                             graph), calibrated before "ready"; prints
//                             "done launches=N kernel_us=K wall_us=W" once they have all run
//   slices SECONDS            1 ms kernels back to back, an event pair around each; prints
//                             "done launches=N pair_us_mean=… pair_us_max=…" (with another
//                             context busy on the device, its timeslices fall inside the pairs)
//   array3d BYTES             cuArray3DCreate_v2, an allocating entry point left unhooked
//   alloc-across FILE A B C   plain allocations: A, then (once FILE exists) B and C; one rc
//                             line each, then exit (an agent restarts while it waits)
//   launches N                N empty kernels back to back, then a synchronize; prints the
//                             mean cost of one launch (the interposer's overhead, native vs hooked)
//   legacy BYTES              the v1 ABIs a CUDA 13 runtime still asks for by name: a graph with
//                             a BYTES memory node instantiated through "cuGraphInstantiate" from
//                             cuGetProcAddress (version 11.0) and from dlsym, then the primary
//                             context released through "cuDevicePrimaryCtxRelease" (7.0); one rc
//                             line each, then hold
//   capture N                 N kernels captured from a stream into a graph, then replayed;
//                             then a second capture in which an event recorded into it is
//                             queried (prohibited: the capture is invalidated). Prints
//                             "capture rc=… end rc=…", "replay rc=…", "query rc=… end rc=…"
//   capture-alloc BYTES       a stream-ordered alloc, a kernel and a free captured into a graph;
//                             prints what was charged after the capture and after instantiation
//   clock MS                  two events MS ms apart on the host's clock: prints the device's
//                             elapsed time beside the host's (do the two clocks agree?)
//   fault                     a kernel that stores to an illegal address; prints the rc of the
//                             synchronize after it (a real GPU: 700, CUDA_ERROR_ILLEGAL_ADDRESS)
//
// The kernels are real PTX (kProbePtx), so the same probe runs on the fake driver (which accepts
// any image and times a kernel named "…_<N>us" at N µs) and on a real GPU (scripts/gpu-verify).
// GPUPOOL_PROBE_BLOCKS sets the grid of the compute kernels (default 1; on a real GPU, enough
// blocks to cover every SM make each launch hold the whole device for its 1 ms).
#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/interposer/cuda_api.h"
#include "agent/interposer/ledger/protocol.h"

namespace {

CUcontext g_primary = nullptr;
std::mutex g_out_mu;

// spin_1000us holds each of its blocks for 1 ms of the device's clock (%globaltimer, ns): a
// context preempted while it spins does less work in that ms. work_1000us does a fixed amount of
// work, so it takes as much GPU time however the device is shared: `iterations` dependent LCG
// steps per thread (the compute mode calibrates the count to ~1 ms), the result stored only where
// `out` is non-zero (it never is, but the compiler cannot drop the loop). The fake driver times
// both by their names. spin_0us returns at once; fault_0us stores to address 16, which no
// allocation ever holds.
constexpr char kProbePtx[] = R"(
.version 6.0
.target sm_50
.address_size 64
.visible .entry work_1000us(.param .u64 iterations, .param .u64 out) {
  .reg .pred %p;
  .reg .u64 %n, %i, %o;
  .reg .u32 %x;
  ld.param.u64 %n, [iterations];
  ld.param.u64 %o, [out];
  mov.u32 %x, %tid.x;
  mov.u64 %i, 0;
  setp.eq.u64 %p, %n, 0;
  @%p bra WORK_DONE;
WORK:
  mad.lo.u32 %x, %x, 1664525, 1013904223;
  add.u64 %i, %i, 1;
  setp.lt.u64 %p, %i, %n;
  @%p bra WORK;
WORK_DONE:
  setp.eq.u64 %p, %o, 0;
  @%p bra WORK_END;
  st.global.u32 [%o], %x;
WORK_END:
  ret;
}
.visible .entry spin_1000us() {
  .reg .pred %p;
  .reg .u64 %t<3>;
  mov.u64 %t0, %globaltimer;
SPIN:
  mov.u64 %t1, %globaltimer;
  sub.u64 %t2, %t1, %t0;
  setp.lt.u64 %p, %t2, 1000000;
  @%p bra SPIN;
  ret;
}
.visible .entry spin_0us() {
  ret;
}
.visible .entry fault_0us() {
  .reg .u64 %a;
  .reg .u32 %v;
  mov.u64 %a, 16;
  mov.u32 %v, 1;
  st.global.u32 [%a], %v;
  ret;
}
)";

CUfunction ProbeKernel(const char* name) {
  static CUmodule mod = nullptr;
  if (mod == nullptr && cuModuleLoadData(&mod, kProbePtx) != CUDA_SUCCESS) return nullptr;
  CUfunction f = nullptr;
  return cuModuleGetFunction(&f, mod, name) == CUDA_SUCCESS ? f : nullptr;
}

unsigned ProbeBlocks() {
  const char* v = getenv("GPUPOOL_PROBE_BLOCKS");
  unsigned n = v != nullptr ? static_cast<unsigned>(strtoul(v, nullptr, 10)) : 1;
  return n == 0 ? 1 : n;
}

void Say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Say(const char* fmt, ...) {
  std::lock_guard<std::mutex> l(g_out_mu);
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
}

void HoldUntilEof() {
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
}

int Setup() {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return r;
  r = cuDevicePrimaryCtxRetain(&g_primary, 0);
  if (r != CUDA_SUCCESS) return r;
  return cuCtxSetCurrent(g_primary);
}

CUmemAllocationProp VmmProp() {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  return p;
}

CUmemoryPool NewPool(uint64_t threshold) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  if (cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS) return nullptr;
  cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  return pool;
}

// A graph that allocates `bytes` of device memory (a memory node) and frees it again.
CUgraph AllocGraph(size_t bytes) {
  CUgraph g = nullptr;
  cuGraphCreate(&g, 0);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.bytesize = bytes;
  CUgraphNode node = nullptr;
  cuGraphAddMemAllocNode(&node, g, nullptr, 0, &params);
  cuGraphAddMemFreeNode(&node, g, &node, 1, params.dptr);
  return g;
}

// One live object of any path, and how to free it.
struct Obj {
  enum Kind { kPlain, kArray, kVmm, kPool, kGraph } kind;
  CUdeviceptr ptr = 0;
  CUarray arr = nullptr;
  CUmemGenericAllocationHandle h = 0;
  CUgraphExec exec = nullptr;
  size_t bytes = 0;
};

CUresult Free(const Obj& o) {
  switch (o.kind) {
    case Obj::kPlain:
      return cuMemFree_v2(o.ptr);
    case Obj::kArray:
      return cuArrayDestroy(o.arr);
    case Obj::kPool:
      return cuMemFreeAsync(o.ptr, nullptr);
    case Obj::kGraph:
      return cuGraphExecDestroy(o.exec);
    case Obj::kVmm: {
      CUresult r = cuMemUnmap(o.ptr, o.bytes);
      if (r == CUDA_SUCCESS) r = cuMemRelease(o.h);
      if (r == CUDA_SUCCESS) r = cuMemAddressFree(o.ptr, o.bytes);
      return r;
    }
  }
  return CUDA_ERROR_UNKNOWN;
}

const char* const kPaths[] = {"plain", "pitch", "managed", "array",
                              "vmm",   "pool",  "async",   "graph"};
constexpr int kNumPaths = 8;

// Allocates `bytes` on path `p`; CUDA_SUCCESS fills `o`.
CUresult Alloc(int p, size_t bytes, CUmemoryPool pool, Obj* o) {
  o->bytes = bytes;
  switch (p) {
    case 0:
      o->kind = Obj::kPlain;
      return cuMemAlloc_v2(&o->ptr, bytes);
    case 1: {
      o->kind = Obj::kPlain;
      size_t pitch = 0;
      return cuMemAllocPitch_v2(&o->ptr, &pitch, bytes, 1, 4);
    }
    case 2:
      o->kind = Obj::kPlain;
      return cuMemAllocManaged(&o->ptr, bytes, CU_MEM_ATTACH_GLOBAL);
    case 3: {
      // Rows of at most 64 KiB (a real GPU limits an array's width): `bytes` rounded up to whole
      // rows past that.
      o->kind = Obj::kArray;
      size_t width = bytes < 65536 ? bytes : 65536;
      size_t height = (bytes + width - 1) / width;
      o->bytes = width * height;
      CUDA_ARRAY_DESCRIPTOR d{width, height, CU_AD_FORMAT_UNSIGNED_INT8, 1};
      return cuArrayCreate_v2(&o->arr, &d);
    }
    case 4: {
      o->kind = Obj::kVmm;
      CUmemAllocationProp prop = VmmProp();
      size_t g = 0;
      cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      o->bytes = bytes = (bytes + g - 1) / g * g;
      CUresult r = cuMemCreate(&o->h, bytes, &prop, 0);
      if (r != CUDA_SUCCESS) return r;
      r = cuMemAddressReserve(&o->ptr, bytes, 0, 0, 0);
      if (r == CUDA_SUCCESS) r = cuMemMap(o->ptr, bytes, 0, o->h, 0);
      if (r != CUDA_SUCCESS) {
        Say("vmm map failed %d", r);
        exit(3);
      }
      return r;
    }
    case 5:
      o->kind = Obj::kPool;
      return cuMemAllocFromPoolAsync(&o->ptr, bytes, pool, nullptr);
    case 6:
      o->kind = Obj::kPool;
      return cuMemAllocAsync(&o->ptr, bytes, nullptr);
    case 7: {
      o->kind = Obj::kGraph;
      CUgraph g = AllocGraph(bytes);
      CUresult r = cuGraphInstantiateWithFlags(&o->exec, g, 0);
      cuGraphDestroy(g);
      return r;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

int PathIndex(const char* name) {
  for (int i = 0; i < kNumPaths; ++i)
    if (strcmp(kPaths[i], name) == 0) return i;
  return -1;
}

int ModeAlloc(const char* path, size_t bytes) {
  int p = PathIndex(path);
  if (p < 0) return 2;
  CUmemoryPool pool = NewPool(0);
  Obj o;
  CUresult r = Alloc(p, bytes, pool, &o);
  Say("rc=%d", r);
  HoldUntilEof();
  if (r == CUDA_SUCCESS) Free(o);
  return 0;
}

int ModeAllocAcross(const char* file, const std::vector<size_t>& sizes) {
  std::vector<Obj> held;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i == 1) {
      while (access(file, F_OK) != 0) usleep(20'000);
    }
    Obj o;
    CUresult r = Alloc(PathIndex("plain"), sizes[i], nullptr, &o);
    Say("rc=%d", r);
    if (r == CUDA_SUCCESS) held.push_back(o);
  }
  for (Obj& o : held) Free(o);
  return 0;
}

int ModeStorm(unsigned seed, int threads, int iters, size_t max_bytes) {
  Say("ready");
  char go[3];
  if (read(0, go, sizeof go) <= 0) return 0;
  CUmemoryPool pool = NewPool(static_cast<uint64_t>(seed % 3) << 20);
  // Half the storms make it the device's current pool: cuMemAllocAsync then grows it.
  if (seed % 2 != 0 && cuDeviceSetMemPool(0, pool) != CUDA_SUCCESS) return 3;
  std::atomic<long> ok[kNumPaths] = {}, oom{0}, bad{0};
  std::vector<std::vector<Obj>> live(static_cast<size_t>(threads));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      cuCtxSetCurrent(g_primary);
      std::mt19937_64 rng(seed * 1000003u + static_cast<unsigned>(t));
      std::vector<Obj>& mine = live[static_cast<size_t>(t)];
      for (int i = 0; i < iters; ++i) {
        int op = static_cast<int>(rng() % 14);
        if (op < kNumPaths) {
          size_t bytes = 1 + rng() % max_bytes;
          if (op == 1) bytes = 1 + rng() % (max_bytes / 2);  // pitch rounds up
          Obj o;
          CUresult r = Alloc(op, bytes, pool, &o);
          if (r == CUDA_SUCCESS) {
            ++ok[op];
            mine.push_back(o);
          } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            ++oom;
          } else {
            Say("error path=%s rc=%d", kPaths[op], r);
            ++bad;
          }
        } else if (op < 11 && !mine.empty()) {
          size_t k = rng() % mine.size();
          if (Free(mine[k]) != CUDA_SUCCESS) ++bad;
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
        } else if (op == 11) {
          cuStreamSynchronize(nullptr);
        } else if (op == 12) {
          cuMemPoolTrimTo(pool, rng() % (2u << 20));
        } else {
          CUcontext c = nullptr;  // a context of its own, briefly
          CUresult r = cuCtxCreate_v2(&c, 0, 0);
          if (r == CUDA_SUCCESS) {
            cuCtxDestroy_v2(c);
          } else if (r != CUDA_ERROR_OUT_OF_MEMORY) {
            ++bad;
          }
          cuCtxSetCurrent(g_primary);
        }
      }
      // Free about half of what is left, so quiescence holds a mix of paths.
      for (size_t k = 0; k < mine.size(); k += 2)
        if (Free(mine[k]) != CUDA_SUCCESS) ++bad;
      std::vector<Obj> keep;
      for (size_t k = 1; k < mine.size(); k += 2) keep.push_back(mine[k]);
      mine.swap(keep);
    });
  }
  for (auto& t : ts) t.join();
  cuCtxSynchronize();  // pools give back what is above their thresholds
  std::string counts;
  for (int p = 0; p < kNumPaths; ++p)
    counts += std::string(" ") + kPaths[p] + "=" + std::to_string(ok[p].load());
  Say("counts%s oom=%ld bad=%ld", counts.c_str(), oom.load(), bad.load());
  Say("quiescent");
  HoldUntilEof();
  return bad.load() == 0 ? 0 : 3;
}

int ModeDlopen(const char* lib, size_t bytes) {
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    Say("dlopen failed: %s", dlerror());
    return 2;
  }
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(h, "cuInit"));
  auto retain =
      reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(dlsym(h, "cuDevicePrimaryCtxRetain"));
  auto set = reinterpret_cast<CUresult (*)(CUcontext)>(dlsym(h, "cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(h, "cuMemAlloc_v2"));
  CUcontext c = nullptr;
  CUdeviceptr p = 0;
  CUresult r = init(0);
  if (r == CUDA_SUCCESS) r = retain(&c, 0);
  if (r == CUDA_SUCCESS) r = set(c);
  if (r == CUDA_SUCCESS) r = alloc(&p, bytes);
  Say("rc=%d", r);
  HoldUntilEof();
  return 0;
}

int ModeGetproc(const char* name, unsigned long long flags, size_t bytes) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = cuGetProcAddress_v2(name, &fn, 12080, flags, &st);
  if (r != CUDA_SUCCESS || fn == nullptr) {
    Say("rc=%d notfound status=%d", r, static_cast<int>(st));
    HoldUntilEof();
    return 0;
  }
  CUdeviceptr p = 0;
  r = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(fn)(&p, bytes);
  Say("rc=%d", r);
  HoldUntilEof();
  return 0;
}

// Like the CUDA runtime: every entry point from cuGetProcAddress_v2 (at the runtime version
// GPUPOOL_PROBE_CUDA_VERSION, default 12080; the per-thread default stream flag), nothing
// linked. Prints the results of: the remaining grant `bytes` by cuMemAlloc, one byte more by
// cuMemAllocAsync, a context synchronize, and cuMemGetInfo's total.
int ModeRuntime(size_t bytes) {
  const char* v = getenv("GPUPOOL_PROBE_CUDA_VERSION");
  const int version = v != nullptr ? atoi(v) : 12080;
  auto get = [version](const char* name) {
    void* fn = nullptr;
    if (cuGetProcAddress_v2(name, &fn, version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                            nullptr) != CUDA_SUCCESS)
      fn = nullptr;
    if (fn == nullptr) Say("missing %s", name);
    return fn;
  };
  auto init = reinterpret_cast<decltype(&cuInit)>(get("cuInit"));
  auto retain =
      reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(get("cuDevicePrimaryCtxRetain"));
  auto set = reinterpret_cast<decltype(&cuCtxSetCurrent)>(get("cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<decltype(&cuMemAlloc_v2)>(get("cuMemAlloc"));
  auto free_fn = reinterpret_cast<decltype(&cuMemFree_v2)>(get("cuMemFree"));
  auto alloc_async = reinterpret_cast<decltype(&cuMemAllocAsync)>(get("cuMemAllocAsync"));
  auto sync = reinterpret_cast<decltype(&cuStreamSynchronize)>(get("cuStreamSynchronize"));
  auto info = reinterpret_cast<decltype(&cuMemGetInfo_v2)>(get("cuMemGetInfo"));
  void* ctx_sync = get("cuCtxSynchronize");  // () before CUDA 13, (CUcontext) from 13.0
  if (!init || !retain || !set || !alloc || !free_fn || !alloc_async || !sync || !info || !ctx_sync)
    return 3;
  CUcontext c = nullptr;
  if (init(0) != CUDA_SUCCESS || retain(&c, 0) != CUDA_SUCCESS || set(c) != CUDA_SUCCESS) return 4;
  CUdeviceptr p = 0, q = 0;
  Say("alloc rc=%d", alloc(&p, bytes));
  Say("async rc=%d", alloc_async(&q, 1, nullptr));
  Say("free rc=%d", free_fn(p));
  Say("async rc=%d", alloc_async(&q, 1, nullptr));
  sync(nullptr);
  CUresult synced = version >= 13000
                        ? reinterpret_cast<decltype(&cuCtxSynchronize_v2)>(ctx_sync)(nullptr)
                        : reinterpret_cast<decltype(&cuCtxSynchronize)>(ctx_sync)();
  Say("ctx-sync rc=%d", synced);
  size_t f = 0, t = 0;
  info(&f, &t);
  Say("total=%zu", t);
  HoldUntilEof();
  return 0;
}

int ModeFork(int n, size_t bytes) {
  // The parent holds a context, memory and its ledger connection; its children (fork, then exec
  // of a CUDA program, as CUDA requires) each start with an inherited environment.
  CUdeviceptr mine = 0;
  if (Setup() != CUDA_SUCCESS || cuMemAlloc_v2(&mine, 4096) != CUDA_SUCCESS) return 4;
  std::string size = std::to_string(bytes);
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      char self[] = "/proc/self/exe", alloc[] = "alloc", plain[] = "plain";
      char* argv[] = {self, alloc, plain, size.data(), nullptr};
      execv(self, argv);
      _exit(127);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  return 0;
}

int ForgeOne(int fd, uint16_t op, uint32_t kind, uint64_t bytes,
             size_t len = sizeof(gpupool::ledger::Request)) {
  gpupool::ledger::Request req{
      gpupool::ledger::kMagic, gpupool::ledger::kVersion, op, kind, 0, bytes, 0};
  char buf[64] = {};
  memcpy(buf, &req, sizeof req);
  if (send(fd, buf, len, MSG_NOSIGNAL) < 0) return -100;
  gpupool::ledger::Response resp{};
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 2000) <= 0) return -101;
  ssize_t n = recv(fd, &resp, sizeof resp, 0);
  return n == static_cast<ssize_t>(sizeof resp) ? resp.status : -102;
}

int ModeForge(size_t bytes) {
  const char* path = getenv("GPUPOOL_LEDGER_SOCKET");
  if (path == nullptr) return 2;
  // The socket file cannot be written as a file.
  FILE* f = fopen(path, "w");
  Say("fopen=%s", f == nullptr ? "refused" : "opened");
  if (f != nullptr) fclose(f);
  auto conn = [&] {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    return fd;
  };
  using gpupool::ledger::Op;
  int fd = conn();
  Say("reserve-before-hello=%d", ForgeOne(fd, 2, 0, 1));
  close(fd);
  fd = conn();
  Say("hello=%d", ForgeOne(fd, 1, 2, 0));
  Say("release-unheld=%d", ForgeOne(fd, 3, 0, 1ull << 30));
  Say("reserve-max=%d", ForgeOne(fd, 2, 0, UINT64_MAX));
  Say("reserve-spill-max=%d", ForgeOne(fd, 2, 1, UINT64_MAX));
  Say("unknown-op=%d", ForgeOne(fd, 77, 0, 0));
  close(fd);
  fd = conn();
  ForgeOne(fd, 1, 2, 0);
  Say("bad-kind=%d", ForgeOne(fd, 2, 9, 1));
  close(fd);
  fd = conn();
  ForgeOne(fd, 1, 2, 0);
  Say("short-frame=%d", ForgeOne(fd, 2, 0, 1, 10));
  close(fd);
  fd = conn();
  ForgeOne(fd, 1, 2, 0);
  Say("long-frame=%d", ForgeOne(fd, 2, 0, 1, 40));
  close(fd);
  // Hold a reservation, drop the connection with a malformed frame, and see it stay charged
  // (the process lives): the orphan keeps it.
  fd = conn();
  ForgeOne(fd, 1, 2, 0);
  Say("reserve-held=%d", ForgeOne(fd, 2, 0, 4096));
  ForgeOne(fd, 2, 0, 1, 3);
  close(fd);
  // Then the real path: the grant still holds.
  int r = Setup();
  CUdeviceptr p = 0;
  if (r == CUDA_SUCCESS) r = cuMemAlloc_v2(&p, bytes);
  Say("rc=%d", r);
  HoldUntilEof();
  return 0;
}

// One launch of `f` with the kernel parameters `params` through `kind` (plain ex coop graph, with
// "-ptsz" for the per-thread-stream entry points); `exec` is the graph of the "graph" kind, whose
// kernel node holds its parameters.
CUresult LaunchAs(const std::string& kind, CUfunction f, unsigned blocks, void** params,
                  CUgraphExec exec) {
  if (kind == "plain")
    return cuLaunchKernel(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  if (kind == "plain-ptsz")
    return cuLaunchKernel_ptsz(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  CUlaunchConfig cfg{blocks, 1, 1, 32, 1, 1, 0, nullptr, nullptr, 0};
  if (kind == "ex") return cuLaunchKernelEx(&cfg, f, params, nullptr);
  if (kind == "ex-ptsz") return cuLaunchKernelEx_ptsz(&cfg, f, params, nullptr);
  if (kind == "coop")
    return cuLaunchCooperativeKernel(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, params);
  if (kind == "coop-ptsz")
    return cuLaunchCooperativeKernel_ptsz(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, params);
  if (kind == "graph") return cuGraphLaunch(exec, nullptr);
  if (kind == "graph-ptsz") return cuGraphLaunch_ptsz(exec, nullptr);
  return CUDA_ERROR_INVALID_VALUE;
}

// A graph of one kernel node: `f` with `params` on `blocks` blocks of 32 threads.
CUresult KernelGraph(CUfunction f, unsigned blocks, void** params, CUgraphExec* exec) {
  CUgraph g = nullptr;
  CUDA_KERNEL_NODE_PARAMS p{};  // the v2 layout: kern and ctx stay NULL
  p.func = f;
  p.gridDimX = blocks;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 32;  // 32 × 1 × 1, as the other kinds launch (32³ threads: refused on a GPU)
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;  // copied into the node when it is added
  CUgraphNode node = nullptr;
  CUresult r = cuGraphCreate(&g, 0);
  const char* step = "create";
  if (r == CUDA_SUCCESS) {
    step = "add-kernel-node";
    r = cuGraphAddKernelNode_v2(&node, g, nullptr, 0, &p);
  }
  if (r == CUDA_SUCCESS) {
    step = "instantiate";
    r = cuGraphInstantiateWithFlags(exec, g, 0);
  }
  if (g != nullptr) cuGraphDestroy(g);
  if (r != CUDA_SUCCESS) Say("graph %s rc=%d", step, r);
  return r;
}

// The device time of one launch, in µs: the least of `n` launches, each between two events (a
// launch that another context's timeslice interrupted measures longer than its own time).
double TimeLaunch(const std::string& kind, CUfunction f, unsigned blocks, void** params,
                  CUgraphExec exec, int n) {
  CUevent a = nullptr, b = nullptr;
  if (cuEventCreate(&a, 0) != CUDA_SUCCESS || cuEventCreate(&b, 0) != CUDA_SUCCESS) return -1;
  double best = -1;
  for (int i = 0; i < n; ++i) {
    float ms = 0;
    if (cuEventRecord(a, nullptr) != CUDA_SUCCESS ||
        LaunchAs(kind, f, blocks, params, exec) != CUDA_SUCCESS ||
        cuEventRecord(b, nullptr) != CUDA_SUCCESS || cuEventSynchronize(b) != CUDA_SUCCESS ||
        cuEventElapsedTime(&ms, a, b) != CUDA_SUCCESS)
      return -1;
    const double us = static_cast<double>(ms) * 1e3;
    if (best < 0 || us < best) best = us;
  }
  cuEventDestroy_v2(a);
  cuEventDestroy_v2(b);
  return best;
}

// Launches ~1 ms kernels of work back to back for `seconds` through `kind` (see LaunchAs), after
// "ready" and a line on stdin, then waits for them all. A real driver queues many launches ahead
// (~1000), and a time-sliced kernel that spins on the clock does less work when preempted, so
// neither the launches issued nor a clock-bound kernel tell a tenant's GPU time: each kernel here
// does a fixed amount of work, timed before "ready" (kernel_us: the least of five launches, so
// that another context's timeslice falling inside one is left out), and all of them have run by
// the end of wall_us. A tenant's share of the device is launches × kernel_us / wall_us.
int ModeCompute(const std::string& kind, double seconds) {
  CUfunction f = ProbeKernel("work_1000us");
  if (f == nullptr) return 3;
  const unsigned blocks = ProbeBlocks();
  uint64_t iterations = 1 << 16;
  CUdeviceptr out = 0;  // never written: see kProbePtx
  void* params[] = {&iterations, &out};
  const bool graph = kind.rfind("graph", 0) == 0;
  CUgraphExec exec = nullptr;
  // A graph's kernel node keeps the parameters it was given: a new graph for each count.
  auto time = [&](int n) -> double {
    if (graph) {
      if (exec != nullptr) cuGraphExecDestroy(exec);
      exec = nullptr;
      if (KernelGraph(f, blocks, params, &exec) != CUDA_SUCCESS) return -1;
    }
    return TimeLaunch(kind, f, blocks, params, exec, n);
  };
  // A warm-up launch (module loading, the first launch's set-up), then the time of 2¹⁶
  // iterations, scaled to ~1 ms, and that timed again.
  const double first = time(1) < 0 ? -1 : time(3);
  if (first <= 0) {
    Say("calibrate rc=failed");
    return 3;
  }
  iterations = std::max<uint64_t>(
      1, static_cast<uint64_t>(static_cast<double>(iterations) * 1000.0 / first));
  const double kernel_us = time(5);
  if (kernel_us <= 0) {
    Say("calibrate rc=failed");
    return 3;
  }
  Say("ready");
  char go[3];
  if (read(0, go, sizeof go) <= 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  long launches = 0;
  const auto t_end = t0 + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < t_end) {
    CUresult r = LaunchAs(kind, f, blocks, params, exec);
    if (r != CUDA_SUCCESS) {
      Say("launch rc=%d", r);
      return 3;
    }
    ++launches;
  }
  CUresult r = cuCtxSynchronize();
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (r != CUDA_SUCCESS) {
    Say("synchronize rc=%d", r);
    return 3;
  }
  Say("done launches=%ld kernel_us=%.1f wall_us=%.0f", launches, kernel_us, wall_us);
  HoldUntilEof();
  return 0;
}

// Launches 1 ms kernels (spin_1000us) back to back for `seconds`, after "ready" and a line on
// stdin, each between a start and an end event, and prints the mean and the largest time between
// the two. The pairs are read 64 launches behind, so that a real driver keeps work queued (a
// context waiting for each kernel would leave the device idle between them, and give it up).
int ModeSlices(double seconds) {
  CUfunction f = ProbeKernel("spin_1000us");
  if (f == nullptr) return 3;
  const unsigned blocks = ProbeBlocks();
  constexpr long kBehind = 64;
  std::vector<CUevent> events(2 * kBehind);
  for (CUevent& e : events)
    if (cuEventCreate(&e, 0) != CUDA_SUCCESS) return 3;
  Say("ready");
  char go[3];
  if (read(0, go, sizeof go) <= 0) return 0;
  long launches = 0, pairs = 0;
  double sum_us = 0, max_us = 0;
  auto read_pair = [&](long i) {
    const size_t k = static_cast<size_t>(2 * (i % kBehind));
    float ms = 0;
    if (cuEventSynchronize(events[k + 1]) != CUDA_SUCCESS ||
        cuEventElapsedTime(&ms, events[k], events[k + 1]) != CUDA_SUCCESS)
      return false;
    const double us = static_cast<double>(ms) * 1e3;
    sum_us += us;
    max_us = std::max(max_us, us);
    ++pairs;
    return true;
  };
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < t_end) {
    if (launches >= kBehind && !read_pair(launches - kBehind)) return 3;
    const size_t k = static_cast<size_t>(2 * (launches % kBehind));
    CUresult r = cuEventRecord(events[k], nullptr);
    if (r == CUDA_SUCCESS)
      r = cuLaunchKernel(f, blocks, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
    if (r == CUDA_SUCCESS) r = cuEventRecord(events[k + 1], nullptr);
    if (r != CUDA_SUCCESS) {
      Say("launch rc=%d", r);
      return 3;
    }
    ++launches;
  }
  for (long i = std::max(0L, launches - kBehind); i < launches; ++i)
    if (!read_pair(i)) return 3;
  Say("done launches=%ld pair_us_mean=%.1f pair_us_max=%.1f", launches,
      pairs != 0 ? sum_us / static_cast<double>(pairs) : 0.0, max_us);
  HoldUntilEof();
  return 0;
}

int ModeLaunches(long n) {
  CUfunction f = ProbeKernel("spin_0us");
  if (f == nullptr || n <= 0) return 3;
  // One launch first: module loading and the first launch's set-up are not what is measured.
  if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS ||
      cuCtxSynchronize() != CUDA_SUCCESS)
    return 3;
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
    if (r != CUDA_SUCCESS) {
      Say("launch rc=%d", r);
      return 3;
    }
  }
  CUresult r = cuCtxSynchronize();
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  Say("launches=%ld rc=%d ns_per_launch=%.1f", n, r, ns / static_cast<double>(n));
  return r == CUDA_SUCCESS ? 0 : 3;
}

int ModeLegacy(size_t bytes) {
  using InstantiateFn = CUresult (*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
  void* by_proc = nullptr;
  cuGetProcAddress_v2("cuGraphInstantiate", &by_proc, 11000, 0, nullptr);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void* by_dlsym = lib != nullptr ? dlsym(lib, "cuGraphInstantiate") : nullptr;
  for (void* fn : {by_proc, by_dlsym}) {
    if (fn == nullptr) {
      Say("instantiate missing");
      continue;
    }
    CUgraph g = AllocGraph(bytes);
    CUgraphExec exec = nullptr;
    CUresult r = reinterpret_cast<InstantiateFn>(fn)(&exec, g, nullptr, nullptr, 0);
    Say("instantiate rc=%d", r);
    if (r == CUDA_SUCCESS) cuGraphExecDestroy(exec);
    cuGraphDestroy(g);
  }
  void* release = nullptr;
  cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &release, 7000, 0, nullptr);
  Say("release rc=%d",
      release != nullptr ? reinterpret_cast<CUresult (*)(CUdevice)>(release)(0) : -1);
  HoldUntilEof();
  return 0;
}

int ModeCapture(int n) {
  CUfunction f = ProbeKernel("spin_1000us");
  CUstream s = nullptr;
  if (f == nullptr || cuStreamCreate(&s, 0) != CUDA_SUCCESS) return 3;
  CUresult r = cuStreamBeginCapture_v2(s, 0);
  for (int i = 0; i < n && r == CUDA_SUCCESS; ++i)
    r = cuLaunchKernel(f, ProbeBlocks(), 1, 1, 32, 1, 1, 0, s, nullptr, nullptr);
  CUgraph g = nullptr;
  CUresult end = cuStreamEndCapture(s, &g);
  Say("capture rc=%d end rc=%d", r, end);
  if (end == CUDA_SUCCESS) {
    CUgraphExec exec = nullptr;
    CUresult rr = cuGraphInstantiateWithFlags(&exec, g, 0);
    if (rr == CUDA_SUCCESS) rr = cuGraphLaunch(exec, s);
    if (rr == CUDA_SUCCESS) rr = cuStreamSynchronize(s);
    Say("replay rc=%d", rr);
    if (exec != nullptr) cuGraphExecDestroy(exec);
    cuGraphDestroy(g);
  }
  CUevent e = nullptr;
  cuEventCreate(&e, 0);
  cuStreamBeginCapture_v2(s, 0);
  cuEventRecord(e, s);
  CUresult q = cuEventQuery(e);
  g = nullptr;
  end = cuStreamEndCapture(s, &g);
  Say("query rc=%d end rc=%d", q, end);
  return 0;
}

// A stream-ordered allocation and free inside a capture (PyTorch's cudaMallocAsync backend under
// torch.cuda.graph): nothing is allocated until the graph is instantiated.
int ModeCaptureAlloc(uint64_t bytes) {
  CUfunction f = ProbeKernel("spin_0us");
  CUstream s = nullptr;
  if (f == nullptr || cuStreamCreate(&s, 0x1 /* CU_STREAM_NON_BLOCKING */) != CUDA_SUCCESS)
    return 3;
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
  cuMemGetInfo_v2(&free0, &total);
  CUdeviceptr p = 0;
  CUresult r = cuStreamBeginCapture_v2(s, 0);
  if (r == CUDA_SUCCESS) r = cuMemAllocAsync(&p, bytes, s);
  if (r == CUDA_SUCCESS) r = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr);
  if (r == CUDA_SUCCESS) r = cuMemFreeAsync(p, s);
  CUgraph g = nullptr;
  CUresult end = cuStreamEndCapture(s, &g);
  cuMemGetInfo_v2(&free1, &total);
  Say("capture rc=%d end rc=%d charged=%lld", r, end,
      static_cast<long long>(free0) - static_cast<long long>(free1));
  if (end != CUDA_SUCCESS) return 0;
  CUgraphExec exec = nullptr;
  CUresult rr = cuGraphInstantiateWithFlags(&exec, g, 0);
  cuMemGetInfo_v2(&free2, &total);
  if (rr == CUDA_SUCCESS) rr = cuGraphLaunch(exec, s);
  if (rr == CUDA_SUCCESS) rr = cuStreamSynchronize(s);
  Say("replay rc=%d charged=%lld", rr,
      static_cast<long long>(free0) - static_cast<long long>(free2));
  if (exec != nullptr) cuGraphExecDestroy(exec);
  cuGraphDestroy(g);
  return 0;
}

int ModeClock(unsigned ms) {
  CUevent a = nullptr, b = nullptr;
  if (cuEventCreate(&a, 0) != CUDA_SUCCESS || cuEventCreate(&b, 0) != CUDA_SUCCESS) return 3;
  cuEventRecord(a, nullptr);
  cuEventSynchronize(a);
  auto t0 = std::chrono::steady_clock::now();
  usleep(ms * 1000);
  cuEventRecord(b, nullptr);
  cuEventSynchronize(b);
  double host =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  float dev = 0;
  CUresult r = cuEventElapsedTime(&dev, a, b);
  Say("rc=%d device_ms=%.2f host_ms=%.2f", r, static_cast<double>(dev), host);
  return 0;
}

int ModeFault() {
  CUfunction f = ProbeKernel("fault_0us");
  if (f == nullptr) return 3;
  CUresult launch = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
  Say("launch rc=%d sync rc=%d", launch, cuCtxSynchronize());
  return 0;
}

int ModeIpcExport(size_t bytes) {
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, bytes);
  CUipcMemHandle h{};
  if (r == CUDA_SUCCESS) r = cuIpcGetMemHandle(&h, p);
  std::string hex;
  for (unsigned char c : h.reserved) {
    char b[3];
    snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  Say("rc=%d handle=%s", r, hex.c_str());
  HoldUntilEof();
  return 0;
}

int ModeIpcImport(const char* hex) {
  CUipcMemHandle h{};
  for (size_t i = 0; i < sizeof h.reserved && hex[2 * i] != 0; ++i) {
    unsigned v = 0;
    sscanf(hex + 2 * i, "%2x", &v);
    h.reserved[i] = static_cast<char>(v);
  }
  CUdeviceptr p = 0;
  CUresult r = cuIpcOpenMemHandle_v2(&p, h, 1);
  Say("rc=%d", r);
  HoldUntilEof();
  if (r == CUDA_SUCCESS) cuIpcCloseMemHandle(p);
  return 0;
}

int ModeSpill(int n, size_t bytes) {
  std::vector<CUdeviceptr> ps;
  for (int i = 0; i < n; ++i) {
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc_v2(&p, bytes);
    Say("rc=%d", r);
    if (r == CUDA_SUCCESS) ps.push_back(p);
  }
  // Spilled memory is real host memory the device can address: write through all of it from the
  // device (cuMemsetD8 where the driver has it: a real one does, the fake does not).
  using MemsetFn = CUresult (*)(CUdeviceptr, unsigned char, size_t);
  auto memset_d8 = reinterpret_cast<MemsetFn>(dlsym(RTLD_DEFAULT, "cuMemsetD8_v2"));
  if (memset_d8 != nullptr) {
    CUresult w = CUDA_SUCCESS;
    for (CUdeviceptr p : ps)
      if (w == CUDA_SUCCESS) w = memset_d8(p, 0x5a, bytes);
    if (w == CUDA_SUCCESS) w = cuCtxSynchronize();
    Say("write rc=%d", w);
  }
  Say("holding");
  HoldUntilEof();
  for (CUdeviceptr p : ps)
    if (cuMemFree_v2(p) != CUDA_SUCCESS) return 3;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  auto arg = [&](int i) { return i < argc ? argv[i] : "0"; };
  auto num = [&](int i) { return static_cast<size_t>(strtoull(arg(i), nullptr, 0)); };
  if (mode == "dlopen") return ModeDlopen(arg(2), num(3));
  if (mode == "fork") return ModeFork(static_cast<int>(num(2)), num(3));
  if (mode == "forge") return ModeForge(num(2));
  if (mode == "runtime") return ModeRuntime(num(2));
  int r = Setup();
  if (r != CUDA_SUCCESS) {
    Say("setup rc=%d", r);
    return 4;
  }
  if (mode == "alloc") return ModeAlloc(arg(2), num(3));
  if (mode == "alloc-across") return ModeAllocAcross(arg(2), {num(3), num(4), num(5)});
  if (mode == "info") {
    size_t free_b = 0, total = 0;
    r = cuMemGetInfo_v2(&free_b, &total);
    Say("rc=%d free=%zu total=%zu", r, free_b, total);
    return 0;
  }
  if (mode == "storm")
    return ModeStorm(static_cast<unsigned>(num(2)), static_cast<int>(num(3)),
                     static_cast<int>(num(4)), num(5));
  if (mode == "getproc") return ModeGetproc(arg(2), num(3), num(4));
  if (mode == "array3d") {  // an allocating entry point the interposer does not hook
    CUarray arr = nullptr;
    CUDA_ARRAY3D_DESCRIPTOR d{num(2), 1, 1, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    Say("rc=%d", cuArray3DCreate_v2(&arr, &d));
    HoldUntilEof();
    return 0;
  }
  if (mode == "nvml-info") {  // NVML through dlopen + dlsym, as nvidia-smi-like tools do
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (h == nullptr) return 2;
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "nvmlInit_v2"));
    auto handle =
        reinterpret_cast<int (*)(unsigned, void**)>(dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
    auto info =
        reinterpret_cast<int (*)(void*, unsigned long long*)>(dlsym(h, "nvmlDeviceGetMemoryInfo"));
    void* dev = nullptr;
    unsigned long long m[3] = {0, 0, 0};  // total, free, used
    if (init == nullptr || handle == nullptr || info == nullptr || init() != 0 ||
        handle(0, &dev) != 0 || info(dev, m) != 0)
      return 3;
    Say("total=%llu used=%llu free=%llu", m[0], m[2], m[1]);
    return 0;
  }
  if (mode == "compute") return ModeCompute(arg(2), strtod(arg(3), nullptr));
  if (mode == "slices") return ModeSlices(strtod(arg(2), nullptr));
  if (mode == "ipc-export") return ModeIpcExport(num(2));
  if (mode == "ipc-import") return ModeIpcImport(arg(2));
  if (mode == "spill") return ModeSpill(static_cast<int>(num(2)), num(3));
  if (mode == "launches") return ModeLaunches(static_cast<long>(num(2)));
  if (mode == "fault") return ModeFault();
  if (mode == "legacy") return ModeLegacy(num(2));
  if (mode == "clock") return ModeClock(static_cast<unsigned>(num(2)));
  if (mode == "capture") return ModeCapture(static_cast<int>(num(2)));
  if (mode == "capture-alloc") return ModeCaptureAlloc(num(2));
  return 2;
}
