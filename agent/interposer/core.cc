// The interposer's plumbing: the real driver, the ledger connection, and the three ways a
// program finds an entry point (the dynamic linker, dlsym, cuGetProcAddress).
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/interposer/interposer.h"

namespace gpupool::interposer {
namespace {

using DlsymFn = void* (*)(void*, const char*);

DlsymFn RealDlsym() {
  static DlsymFn fn = [] {
    // dlsym is versioned in glibc: GLIBC_2.34 since libdl moved into libc, GLIBC_2.2.5 before.
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (p == nullptr) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return fn;
}

// Set while this thread loads the driver or builds the hook table: a dlsym from inside (the
// driver's own initialisation) is answered by the real dlsym, so nothing waits on itself.
}  // namespace
thread_local bool t_inside = false;
namespace {

void* RealLib() {
  static void* lib = [] {
    t_inside = true;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) fprintf(stderr, "gpupool-cuda: cannot load the CUDA driver: %s\n", dlerror());
    t_inside = false;
    return h;
  }();
  return lib;
}

void* SelfLib() {
  static void* self = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&RealSym), &info) == 0 || info.dli_fname == nullptr)
      return static_cast<void*>(nullptr);
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }();
  return self;
}

// Every entry point the library hooks, by ABI name.
const char* const kHooked[] = {"cuInit",
                               "cuGetProcAddress",
                               "cuGetProcAddress_v2",
                               "cuMemGetInfo_v2",
                               "cuMemAlloc_v2",
                               "cuMemAllocPitch_v2",
                               "cuMemAllocManaged",
                               "cuMemFree_v2",
                               "cuArrayCreate_v2",
                               "cuArrayDestroy",
                               "cuMemCreate",
                               "cuMemRelease",
                               "cuMemMap",
                               "cuMemUnmap",
                               "cuMemPoolDestroy",
                               "cuMemPoolTrimTo",
                               "cuMemAllocAsync",
                               "cuMemAllocAsync_ptsz",
                               "cuMemAllocFromPoolAsync",
                               "cuMemAllocFromPoolAsync_ptsz",
                               "cuMemFreeAsync",
                               "cuMemFreeAsync_ptsz",
                               "cuStreamSynchronize",
                               "cuStreamSynchronize_ptsz",
                               "cuCtxSynchronize",
                               "cuCtxSynchronize_v2",
                               "cuEventSynchronize",
                               "cuIpcOpenMemHandle",
                               "cuIpcOpenMemHandle_v2",
                               "cuIpcCloseMemHandle",
                               "cuCtxCreate_v2",
                               "cuCtxCreate_v3",
                               "cuCtxCreate_v4",
                               "cuCtxDestroy_v2",
                               "cuDevicePrimaryCtxRetain",
                               "cuDevicePrimaryCtxRelease",
                               "cuDevicePrimaryCtxRelease_v2",
                               "cuDevicePrimaryCtxReset",
                               "cuDevicePrimaryCtxReset_v2",
                               "cuGraphInstantiate",
                               "cuGraphInstantiate_v2",
                               "cuGraphInstantiateWithFlags",
                               "cuGraphInstantiateWithParams",
                               "cuGraphInstantiateWithParams_ptsz",
                               "cuGraphExecDestroy",
                               "cuLaunchKernel",
                               "cuLaunchKernel_ptsz",
                               "cuLaunchKernelEx",
                               "cuLaunchKernelEx_ptsz",
                               "cuLaunchCooperativeKernel",
                               "cuLaunchCooperativeKernel_ptsz",
                               "cuGraphLaunch",
                               "cuGraphLaunch_ptsz"};

// Allocating entry points that are not hooked: never handed out, whatever the name used. The
// _v1 entry points (32-bit device pointers, before CUDA 3.2) are among them. Imports of memory
// another process allocated (cuMemImportFromShareableHandle, cuMemPoolImportPointer) allocate
// nothing and pass; host allocations (cuMemAllocHost, cuMemHostAlloc) are not device memory.
const char* const kDenied[] = {
    "cuMemAlloc",         "cuMemAllocPitch",        "cuArrayCreate", "cuArray3DCreate",
    "cuArray3DCreate_v2", "cuMipmappedArrayCreate", "cuCtxCreate",
};

struct HookPair {
  void* real;
  void* hook;
};
constexpr size_t kNumHooked = sizeof kHooked / sizeof kHooked[0];
HookPair g_pairs[kNumHooked];
pthread_once_t g_pairs_once = PTHREAD_ONCE_INIT;

void BuildPairs() {
  t_inside = true;
  DlsymFn real_dlsym = RealDlsym();
  void* lib = RealLib();
  void* self = SelfLib();
  for (size_t i = 0; i < kNumHooked; ++i) {
    g_pairs[i].real = lib != nullptr ? real_dlsym(lib, kHooked[i]) : nullptr;
    g_pairs[i].hook = self != nullptr ? real_dlsym(self, kHooked[i]) : nullptr;
  }
  t_inside = false;
}

// Strips the ABI suffixes (_v2…, _ptsz, _ptds) from an entry point's name.
size_t BaseLen(const char* name) {
  size_t n = strlen(name);
  for (bool again = true; again;) {
    again = false;
    if (n > 5 &&
        (strncmp(name + n - 5, "_ptsz", 5) == 0 || strncmp(name + n - 5, "_ptds", 5) == 0)) {
      n -= 5;
      again = true;
    } else if (n > 3 && name[n - 3] == '_' && name[n - 2] == 'v' && name[n - 1] >= '1' &&
               name[n - 1] <= '9') {
      n -= 3;
      again = true;
    }
  }
  return n;
}

ledger::LedgerClient g_ledger;
pthread_mutex_t g_ledger_mu = PTHREAD_MUTEX_INITIALIZER;
bool g_warned = false;

// The lease: VRAM reserved in the ledger but not yet backing an allocation of this process.
pthread_mutex_t g_lease_mu = PTHREAD_MUTEX_INITIALIZER;  // guards g_lease_free
uint64_t g_lease_free = 0;

void AtForkChild() {
  // A connection is charged to the process that opened it: the child opens its own on first use.
  pthread_mutex_init(&g_ledger_mu, nullptr);
  pthread_mutex_init(&g_lease_mu, nullptr);
  g_lease_free = 0;  // the parent's lease stays the parent's
  g_ledger.Reset();
}

__attribute__((constructor)) void Init() { pthread_atfork(nullptr, nullptr, &AtForkChild); }

}  // namespace

void* RealDlsymOf(void* handle, const char* name) {
  DlsymFn real_dlsym = RealDlsym();
  return real_dlsym != nullptr ? real_dlsym(handle, name) : nullptr;
}

void* RealSym(const char* name) {
  void* lib = RealLib();
  DlsymFn real_dlsym = RealDlsym();
  return lib != nullptr && real_dlsym != nullptr ? real_dlsym(lib, name) : nullptr;
}

ledger::LedgerClient* Ledger() {
  if (g_ledger.connected()) return &g_ledger;
  pthread_mutex_lock(&g_ledger_mu);
  if (!g_ledger.connected()) {
    const char* path = getenv(ledger::kSocketEnv);
    if (!g_ledger.Connect(path) && !g_warned) {
      g_warned = true;
      fprintf(stderr, "gpupool-cuda: no GPU ledger at %s=%s: refusing device memory\n",
              ledger::kSocketEnv, path != nullptr ? path : "(unset)");
    }
  }
  pthread_mutex_unlock(&g_ledger_mu);
  return g_ledger.connected() ? &g_ledger : nullptr;
}

namespace {
bool Call(ledger::Op op, ledger::Kind kind, uint64_t bytes) {
  ledger::LedgerClient* l = Ledger();
  ledger::Response r;
  return l != nullptr && l->Call(op, kind, bytes, &r) &&
         r.status == static_cast<int32_t>(ledger::Status::kOk);
}
}  // namespace

// With a lease of L bytes, a reservation is taken from what this process already holds when it
// can; otherwise the missing part plus L is asked for, and if the grant refuses that, exactly
// the missing part (so one process alone still gets every byte of its grant). A release keeps
// up to 2L and gives the rest back.
bool ReserveVram(uint64_t bytes) {
  ledger::LedgerClient* l = Ledger();
  if (l == nullptr) return false;
  uint64_t lease = l->hello().lease_bytes;
  if (lease == 0) return Call(ledger::Op::kReserve, ledger::Kind::kVram, bytes);
  pthread_mutex_lock(&g_lease_mu);
  bool ok = true;
  if (g_lease_free >= bytes) {
    g_lease_free -= bytes;
  } else {
    uint64_t need = bytes - g_lease_free;
    if (need <= UINT64_MAX - lease &&
        Call(ledger::Op::kReserve, ledger::Kind::kVram, need + lease)) {
      g_lease_free = lease;
    } else if (Call(ledger::Op::kReserve, ledger::Kind::kVram, need)) {
      g_lease_free = 0;
    } else {
      ok = false;
    }
  }
  pthread_mutex_unlock(&g_lease_mu);
  return ok;
}

bool ReserveSpill(uint64_t bytes) {
  return Call(ledger::Op::kReserve, ledger::Kind::kSpill, bytes);
}
void ReleaseVram(uint64_t bytes) {
  if (bytes == 0) return;
  ledger::LedgerClient* l = Ledger();
  uint64_t lease = l != nullptr ? l->hello().lease_bytes : 0;
  if (lease == 0) {
    Call(ledger::Op::kRelease, ledger::Kind::kVram, bytes);
    return;
  }
  pthread_mutex_lock(&g_lease_mu);
  g_lease_free += bytes;
  if (g_lease_free > 2 * lease &&
      Call(ledger::Op::kRelease, ledger::Kind::kVram, g_lease_free - lease))
    g_lease_free = lease;
  pthread_mutex_unlock(&g_lease_mu);
}
void ReleaseSpill(uint64_t bytes) {
  if (bytes != 0) Call(ledger::Op::kRelease, ledger::Kind::kSpill, bytes);
}

void* HookFor(const void* real_fn) {
  pthread_once(&g_pairs_once, &BuildPairs);
  if (real_fn == nullptr) return nullptr;
  for (const HookPair& p : g_pairs)
    if (p.real == real_fn) return p.hook;
  return nullptr;
}

void* HookByName(const char* name) {
  pthread_once(&g_pairs_once, &BuildPairs);
  for (size_t i = 0; i < kNumHooked; ++i)
    if (strcmp(kHooked[i], name) == 0) return g_pairs[i].hook;
  return nullptr;
}

bool Denied(const char* name) {
  size_t n = BaseLen(name);
  for (const char* d : kDenied)
    if (strcmp(d, name) == 0) return true;
  // A base name (or any suffix of one) of a hooked entry point whose pointer was not recognised.
  for (const char* h : kHooked)
    if (BaseLen(h) == n && strncmp(h, name, n) == 0) return true;
  return false;
}

}  // namespace gpupool::interposer

using gpupool::interposer::Denied;
using gpupool::interposer::HookByName;
using gpupool::interposer::HookFor;

// dlsym: a program that opens the driver itself and looks entry points up through the handle
// gets the hooks, whatever handle (or copy of the driver) it uses.
// Limitation: dlsym(RTLD_NEXT, …) resolves relative to this library, not to its caller.
GPUPOOL_EXPORT void* dlsym(void* handle, const char* name) {
  void* real = gpupool::interposer::RealDlsym()(handle, name);
  if (real == nullptr || gpupool::interposer::t_inside) return real;
  // NVML's memory figures show the slice too (hooks_nvml.cc).
  if (strncmp(name, "nvmlDeviceGetMemoryInfo", 23) == 0 &&
      (name[23] == 0 || strcmp(name + 23, "_v2") == 0)) {
    void* self = gpupool::interposer::SelfLib();
    void* hook = self != nullptr ? gpupool::interposer::RealDlsym()(self, name) : nullptr;
    return hook != nullptr ? hook : real;
  }
  if (name[0] != 'c' || name[1] != 'u') return real;
  if (void* hook = HookByName(name); hook != nullptr) return hook;
  if (void* hook = HookFor(real); hook != nullptr) return hook;
  if (Denied(name)) {
    fprintf(stderr,
            "gpupool-cuda: refused dlsym(%s): an entry point of the driver this library does "
            "not hook\n",
            name);
    return nullptr;
  }
  // A second copy of the driver (another path, same code) would be a second, uninitialised
  // driver: every entry point is answered by the one driver the hooks call.
  void* canonical = gpupool::interposer::RealSym(name);
  return canonical != nullptr ? canonical : real;
}

namespace {
// GPUPOOL_CUDA_TRACE=1 logs every cuGetProcAddress answer to stderr (which ABI was hooked).
bool Tracing() {
  static const bool on = getenv("GPUPOOL_CUDA_TRACE") != nullptr;
  return on;
}

CUresult Resolve(const char* symbol, int version, cuuint64_t flags, void** pfn, CUresult r,
                 CUdriverProcAddressQueryResult* st) {
  if (r != CUDA_SUCCESS || pfn == nullptr || *pfn == nullptr) return r;
  if (void* hook = HookFor(*pfn); hook != nullptr) {
    if (Tracing())
      fprintf(stderr, "gpupool-cuda: cuGetProcAddress %s %d %llu: hooked\n", symbol, version,
              static_cast<unsigned long long>(flags));
    *pfn = hook;
    return r;
  }
  if (Denied(symbol)) {  // an allocating entry point we do not recognise: not handed out
    // Said every time: a program that then fails ("requires a newer driver") shows why.
    fprintf(stderr,
            "gpupool-cuda: refused cuGetProcAddress(%s, version %d, flags %llu): the driver's "
            "entry point is not one this library hooks\n",
            symbol, version, static_cast<unsigned long long>(flags));
    *pfn = nullptr;
    if (st != nullptr) *st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (Tracing())
    fprintf(stderr, "gpupool-cuda: cuGetProcAddress %s %d %llu: passed\n", symbol, version,
            static_cast<unsigned long long>(flags));
  return r;
}
}  // namespace

// cuGetProcAddress (CUDA 11.3–12.4 signature) and _v2 (12.5+, with a query result): whatever
// symbol, version and flags, a pointer the real driver hands out is mapped to its hook.
GPUPOOL_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                         cuuint64_t flags) {
  auto real = REAL(cuGetProcAddress);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Resolve(symbol, version, flags, pfn, real(symbol, pfn, version, flags), nullptr);
}

GPUPOOL_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                            cuuint64_t flags,
                                            CUdriverProcAddressQueryResult* status) {
  auto real = REAL(cuGetProcAddress_v2);
  if (real == nullptr) {  // an older driver: answer from the v1 entry point
    CUresult r = cuGetProcAddress(symbol, pfn, version, flags);
    if (status != nullptr)
      *status =
          r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return r;
  }
  return Resolve(symbol, version, flags, pfn, real(symbol, pfn, version, flags, status), status);
}

// The driver versions whose ABI this library was written against: 11.4 (the stream-ordered
// allocator, graph memory nodes and cuGetProcAddress all present) up to 13.0, the newest whose
// answers for every hooked name were checked on a real driver (scripts/gpu-verify, "entry
// points", driver 580.159.04: 13.0 had added cuCtxSynchronize_v2). A minor release can add such a
// variant too, so a newer driver is refused until that check has passed on it.
constexpr int kOldestDriver = 11040;
constexpr int kNewestDriver = 13000;

GPUPOOL_EXPORT CUresult cuInit(unsigned flags) {
  auto real = REAL(cuInit);
  auto version = REAL(cuDriverGetVersion);
  if (real == nullptr || version == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  int v = 0;
  if (version(&v) != CUDA_SUCCESS || v < kOldestDriver || v > kNewestDriver) {
    // An entry point this library does not know of could allocate unseen: refuse to run.
    fprintf(stderr, "gpupool-cuda: CUDA driver version %d is not supported (%d..%d)\n", v,
            kOldestDriver, kNewestDriver);
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  if (gpupool::interposer::Ledger() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;  // fail closed
  return real(flags);
}
