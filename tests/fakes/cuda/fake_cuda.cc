// A fake libcuda.so.1 for tests: the driver API surface gpupool's interposer hooks, following the
// behaviour NVIDIA documents (https://docs.nvidia.com/cuda/cuda-driver-api/), on simulated devices.
//
// Devices: GPUPOOL_FAKE_CUDA_DEVICES = "name,total_bytes,sm_count,context_bytes[;…]" (default one
// 64 MiB device, 8 SMs, 1 MiB per context). Device memory truth lives in shared memory under
// GPUPOOL_FAKE_CUDA_STATE (fake_state.h), charged per process, freed when the process ends.
// Kernels: cuModuleGetFunction accepts any name; a name ending in "_<N>us" runs N µs of device
// time, any other GPUPOOL_FAKE_CUDA_KERNEL_US (default 50). The device runs one kernel at a time.
//
// Deliberate simplifications (documented in docs/interposer.md): every stream is synchronous (a
// launch returns when its kernel has run, so cuStreamSynchronize only releases pool memory);
// managed memory is resident on the device; graph memory is physically allocated at
// instantiation and freed with the executable graph; the _v1 (32-bit CUdeviceptr) entry points
// are not exported.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/interposer/cuda_api.h"
#include "tests/fakes/cuda/fake_state.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace {

using gpupool::fakecuda::DeviceState;

struct Profile {
  std::string name;
  uint64_t total;
  int sms;
  uint64_t context_bytes;
};

struct Event {
  uint64_t recorded_ns;  // when cuEventRecord was called
  uint64_t stamp_ns;     // when the device processed it; 0: not yet
};

// A context. Without MPS a GPU runs one context at a time; an event recorded in a context is
// processed when that context next has the device, so it waits here until the context's next
// kernel takes the engine (or, if none follows, counts as processed when it was recorded).
struct Ctx {
  int dev;
  bool primary;
  std::vector<Event*> pending;  // guarded by g_mu
  bool just_ran = false;        // its last kernel ended and nothing was recorded since
};

enum class Kind { kPlain, kManaged, kPool, kIpc, kGraph };
struct Alloc {
  uint64_t size;
  int dev;
  Kind kind;
  CUmemoryPool pool;
};

struct Pool {
  int dev;
  uint64_t reserved = 0, used = 0, threshold = 0, reserved_high = 0, used_high = 0;
};

struct VmmHandle {
  uint64_t size;
  int dev;
  int refs;  // the handle itself plus one per mapping
};

struct HostBlock {
  uint64_t size;
  unsigned flags;
  bool registered;
};

struct Function {
  uint64_t duration_ns;
};

struct Node {
  enum { kKernel, kAlloc, kFree, kEmpty } type;
  CUfunction func;
  uint64_t bytes;
  CUdeviceptr dptr;
};
struct Graph {
  std::vector<Node*> nodes;
};
struct Exec {
  int dev;
  std::vector<CUfunction> kernels;
  uint64_t alloc_bytes;
};

struct IpcWire {  // what a CUipcMemHandle carries in the fake
  uint64_t magic;
  int32_t pid;
  int32_t dev;
  uint64_t start_time;
  CUdeviceptr base;
  uint64_t size;
};
constexpr uint64_t kIpcMagic = 0x6970636861646c65ULL;

std::mutex g_mu;  // guards every process-local table below
bool g_init = false;
std::vector<Profile> g_profiles;
std::vector<DeviceState*> g_devs;
std::map<CUdeviceptr, Alloc> g_allocs;
std::map<CUdeviceptr, uint64_t> g_reserved_va;
std::map<CUdeviceptr, CUmemGenericAllocationHandle> g_mappings;
std::map<CUmemGenericAllocationHandle, VmmHandle> g_handles;
std::map<void*, HostBlock> g_host;
std::map<CUarray, std::pair<uint64_t, int>> g_arrays;
std::vector<Pool*> g_pools;
std::vector<Pool*> g_default_pool;
std::vector<Pool*> g_current_pool;  // cuDeviceSetMemPool's; cuMemAllocAsync allocates from it
std::vector<Ctx*> g_primary;
std::vector<int> g_primary_refs;
std::vector<uint64_t> g_graph_mem;
CUmemGenericAllocationHandle g_next_handle = 1;
CUdeviceptr g_next_va = 0;
thread_local CUcontext t_ctx = nullptr;

constexpr uint64_t kGranularity = 2ull << 20;
// How long a resident context that queued an event keeps the device for the work after it.
constexpr uint64_t kQueuedWorkNs = 200'000;

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = getenv(name);
  return v != nullptr && *v != 0 ? strtoull(v, nullptr, 10) : def;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void ParseProfiles() {
  const char* spec = getenv("GPUPOOL_FAKE_CUDA_DEVICES");
  std::string s = spec != nullptr && *spec != 0 ? spec : "gpupool fake 64MiB,67108864,8,1048576";
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(';', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    Profile p{"", 0, 1, 0};
    size_t c1 = item.find(','), c2 = item.find(',', c1 + 1), c3 = item.find(',', c2 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos || c3 == std::string::npos) continue;
    p.name = item.substr(0, c1);
    p.total = strtoull(item.c_str() + c1 + 1, nullptr, 10);
    p.sms = atoi(item.c_str() + c2 + 1);
    p.context_bytes = strtoull(item.c_str() + c3 + 1, nullptr, 10);
    g_profiles.push_back(p);
  }
}

// Device memory, charged to this process in the shared truth.
CUresult Charge(int dev, uint64_t bytes) {
  DeviceState* s = g_devs[dev];
  gpupool::fakecuda::Lock(&s->mu);
  // The memory of processes that have ended is free (the real driver frees it at exit): reaped
  // here whenever it matters, i.e. before a refusal or a new high-water mark.
  if (s->used + bytes > s->high_water || s->used + bytes < s->used)
    gpupool::fakecuda::ReapLocked(s);
  if (s->used + bytes > s->total || s->used + bytes < s->used) {
    ++s->oom_refusals;
    pthread_mutex_unlock(&s->mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  gpupool::fakecuda::ProcEntry* e = gpupool::fakecuda::FindLocked(s, getpid(), true);
  if (e == nullptr) {
    pthread_mutex_unlock(&s->mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  e->bytes += bytes;
  s->used += bytes;
  s->high_water = std::max(s->high_water, s->used);
  pthread_mutex_unlock(&s->mu);
  return CUDA_SUCCESS;
}

void Uncharge(int dev, uint64_t bytes) {
  DeviceState* s = g_devs[dev];
  gpupool::fakecuda::Lock(&s->mu);
  gpupool::fakecuda::ProcEntry* e = gpupool::fakecuda::FindLocked(s, getpid(), false);
  if (e != nullptr) {
    uint64_t n = std::min(bytes, e->bytes);
    e->bytes -= n;
    s->used -= n;
  }
  pthread_mutex_unlock(&s->mu);
}

// REQUIRES: g_mu. Fresh device virtual addresses, unique within the process.
CUdeviceptr NewVa(uint64_t size, uint64_t align = 512) {
  if (g_next_va == 0) g_next_va = 0x100000000000ull;
  g_next_va = (g_next_va + align - 1) / align * align;
  CUdeviceptr p = g_next_va;
  g_next_va += std::max<uint64_t>(size, 1);
  return p;
}

int CurrentDev() {
  auto* c = reinterpret_cast<Ctx*>(t_ctx);
  return c != nullptr ? c->dev : -1;
}

#define REQUIRE_INIT() \
  if (!g_init) return CUDA_ERROR_NOT_INITIALIZED
#define REQUIRE_CTX() \
  REQUIRE_INIT();     \
  if (CurrentDev() < 0) return CUDA_ERROR_INVALID_CONTEXT

// REQUIRES: g_mu. Gives pool memory above the release threshold back (on synchronize).
void ReleasePoolsLocked() {
  for (Pool* p : g_pools) {
    uint64_t keep = std::max(p->threshold, p->used);
    if (p->reserved > keep) {
      Uncharge(p->dev, p->reserved - keep);
      p->reserved = keep;
    }
  }
}

uint64_t FormatBytes(int f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

// Runs one kernel: the device executes one at a time.
void RunKernel(CUfunction f) {
  uint64_t ns = reinterpret_cast<Function*>(f)->duration_ns;
  int dev = std::max(CurrentDev(), 0);
  DeviceState* s = g_devs[dev];
  auto me = reinterpret_cast<uint64_t>(t_ctx);
  for (;;) {  // another context's timeslice: wait for it to end (or its owner to idle past it)
    gpupool::fakecuda::Lock(&s->engine);
    uint64_t now = NowNs();
    bool mine = s->engine_pid == getpid() && s->engine_ctx == me;
    if (mine || now >= s->engine_until_ns) break;
    uint64_t wait = s->engine_until_ns - now;
    pthread_mutex_unlock(&s->engine);
    timespec w{0, static_cast<long>(std::min<uint64_t>(wait, 1000000))};
    nanosleep(&w, nullptr);
  }
  uint64_t t0 = NowNs();
  s->engine_pid = getpid();
  s->engine_ctx = reinterpret_cast<uint64_t>(t_ctx);
  if (auto* c = reinterpret_cast<Ctx*>(t_ctx)) {
    std::lock_guard<std::mutex> l(g_mu);
    for (Event* e : c->pending) e->stamp_ns = t0;
    c->pending.clear();
  }
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (ns != 0 && nanosleep(&ts, &ts) != 0) {
  }
  uint64_t t1 = NowNs();
  uint64_t took = t1 - t0;
  s->engine_until_ns = t1;  // idle now: nothing keeps the device for this context
  if (auto* c = reinterpret_cast<Ctx*>(t_ctx)) c->just_ran = true;
  pthread_mutex_unlock(&s->engine);
  gpupool::fakecuda::Lock(&s->mu);
  if (auto* e = gpupool::fakecuda::FindLocked(s, getpid(), true)) {
    e->busy_ns += took;
    ++e->kernels;
  }
  pthread_mutex_unlock(&s->mu);
}

CUresult AllocPlain(CUdeviceptr* dptr, uint64_t size, Kind kind) {
  if (dptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int dev = CurrentDev();
  CUresult r = Charge(dev, size);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> l(g_mu);
  *dptr = NewVa(size);
  g_allocs[*dptr] = Alloc{size, dev, kind, nullptr};
  return CUDA_SUCCESS;
}

CUresult AllocPool(CUdeviceptr* dptr, size_t size, CUmemoryPool hpool) {
  if (dptr == nullptr || size == 0 || hpool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<Pool*>(hpool);
  std::lock_guard<std::mutex> l(g_mu);
  if (p->used + size > p->reserved) {
    uint64_t grow = p->used + size - p->reserved;
    CUresult r = Charge(p->dev, grow);
    if (r != CUDA_SUCCESS) {
      ReleasePoolsLocked();  // the driver trims its pools before failing an allocation
      r = Charge(p->dev, grow);
      if (r != CUDA_SUCCESS) return r;
    }
    p->reserved += grow;
  }
  p->used += size;
  p->reserved_high = std::max(p->reserved_high, p->reserved);
  p->used_high = std::max(p->used_high, p->used);
  *dptr = NewVa(size);
  g_allocs[*dptr] = Alloc{size, p->dev, Kind::kPool, hpool};
  return CUDA_SUCCESS;
}

CUresult CtxCreate(CUcontext* pctx, CUdevice dev, bool primary) {
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  uint64_t overhead = g_profiles[dev].context_bytes;
  if (overhead != 0) {
    CUresult r = Charge(dev, overhead);
    if (r != CUDA_SUCCESS) return r;
  }
  *pctx = reinterpret_cast<CUcontext>(new Ctx{dev, primary, {}, false});
  return CUDA_SUCCESS;
}

void CtxFree(CUcontext ctx) {
  auto* c = reinterpret_cast<Ctx*>(ctx);
  if (g_profiles[c->dev].context_bytes != 0) Uncharge(c->dev, g_profiles[c->dev].context_bytes);
  if (t_ctx == ctx) t_ctx = nullptr;
  delete c;
}

}  // namespace

// ---- initialization, devices ----------------------------------------------------------------

FAKE_API CUresult cuInit(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_init) return CUDA_SUCCESS;
  const char* dir = getenv("GPUPOOL_FAKE_CUDA_STATE");
  if (dir == nullptr || *dir == 0) return CUDA_ERROR_NO_DEVICE;
  ParseProfiles();
  for (size_t i = 0; i < g_profiles.size(); ++i) {
    DeviceState* s = gpupool::fakecuda::MapDevice(dir, static_cast<int>(i), g_profiles[i].total);
    if (s == nullptr) return CUDA_ERROR_OPERATING_SYSTEM;
    g_devs.push_back(s);
    auto* pool = new Pool{static_cast<int>(i)};
    g_pools.push_back(pool);
    g_default_pool.push_back(pool);
    g_current_pool.push_back(pool);
    g_primary.push_back(nullptr);
    g_primary_refs.push_back(0);
    g_graph_mem.push_back(0);
  }
  if (g_devs.empty()) return CUDA_ERROR_NO_DEVICE;
  g_init = true;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = static_cast<int>(EnvU64("GPUPOOL_FAKE_CUDA_DRIVER_VERSION", 12080));
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int* n) {
  REQUIRE_INIT();
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *n = static_cast<int>(g_devs.size());
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  REQUIRE_INIT();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  REQUIRE_INIT();
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, static_cast<size_t>(len), "%s", g_profiles[d].name.c_str());
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  REQUIRE_INIT();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = g_profiles[d].total;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetAttribute(int* v, int attrib, CUdevice d) {
  REQUIRE_INIT();
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (attrib != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) return CUDA_ERROR_INVALID_VALUE;
  *v = g_profiles[d].sms;
  return CUDA_SUCCESS;
}

// ---- contexts ------------------------------------------------------------------------------

FAKE_API CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned /*flags*/, CUdevice dev) {
  REQUIRE_INIT();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CtxCreate(pctx, dev, false);
  if (r == CUDA_SUCCESS) t_ctx = *pctx;  // documented: the new context is made current
  return r;
}

FAKE_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
  REQUIRE_INIT();
  if (ctx == nullptr || reinterpret_cast<Ctx*>(ctx)->primary) return CUDA_ERROR_INVALID_CONTEXT;
  CtxFree(ctx);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  REQUIRE_INIT();
  t_ctx = ctx;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  REQUIRE_INIT();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_ctx;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice* d) {
  REQUIRE_CTX();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *d = CurrentDev();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSynchronize() {
  REQUIRE_CTX();
  std::lock_guard<std::mutex> l(g_mu);
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  REQUIRE_INIT();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_primary[dev] == nullptr) {
    CUcontext c;
    CUresult r = CtxCreate(&c, dev, true);
    if (r != CUDA_SUCCESS) return r;
    g_primary[dev] = reinterpret_cast<Ctx*>(c);
  }
  ++g_primary_refs[dev];
  *pctx = reinterpret_cast<CUcontext>(g_primary[dev]);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  REQUIRE_INIT();
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_primary_refs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--g_primary_refs[dev] == 0) {  // since CUDA 11: the last release destroys it
    CtxFree(reinterpret_cast<CUcontext>(g_primary[dev]));
    g_primary[dev] = nullptr;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned* flags, int* active) {
  REQUIRE_INIT();
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(g_mu);
  *flags = 0;
  *active = g_primary[dev] != nullptr ? 1 : 0;
  return CUDA_SUCCESS;
}

// ---- memory ---------------------------------------------------------------------------------

FAKE_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  REQUIRE_CTX();
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DeviceState* s = g_devs[CurrentDev()];
  gpupool::fakecuda::Lock(&s->mu);
  gpupool::fakecuda::ReapLocked(s);
  *total = s->total;
  *free_bytes = s->total - s->used;
  pthread_mutex_unlock(&s->mu);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t size) {
  REQUIRE_CTX();
  return AllocPlain(dptr, size, Kind::kPlain);
}

FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                     unsigned elem) {
  REQUIRE_CTX();
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + 511) / 512 * 512;  // rows aligned to the texture pitch alignment
  if (height > UINT64_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = AllocPlain(dptr, p * height, Kind::kPlain);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return AllocPlain(dptr, size, Kind::kManaged);
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REQUIRE_INIT();
  if (dptr == 0) return CUDA_SUCCESS;
  Alloc a;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_allocs.find(dptr);
    if (it == g_allocs.end() || it->second.kind == Kind::kIpc || it->second.kind == Kind::kGraph)
      return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    g_allocs.erase(it);
    if (a.kind == Kind::kPool) {  // freeing pool memory synchronously returns it to the pool
      reinterpret_cast<Pool*>(a.pool)->used -= a.size;
      return CUDA_SUCCESS;
    }
  }
  Uncharge(a.dev, a.size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.upper_bound(dptr);
  if (it == g_allocs.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (dptr >= it->first + it->second.size) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second.size;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuArrayCreate_v2(CUarray* arr, const CUDA_ARRAY_DESCRIPTOR* d) {
  REQUIRE_CTX();
  if (arr == nullptr || d == nullptr || d->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t eb = FormatBytes(d->Format);
  if (eb == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = d->Height == 0 ? 1 : d->Height;
  uint64_t row = eb * d->NumChannels * d->Width;
  if (d->Width > (1ull << 40) || h > UINT64_MAX / row) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t bytes = row * h;
  int dev = CurrentDev();
  CUresult r = Charge(dev, bytes);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> l(g_mu);
  *arr = reinterpret_cast<CUarray>(new char(0));
  g_arrays[*arr] = {bytes, dev};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuArray3DCreate_v2(CUarray* arr, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  REQUIRE_CTX();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR flat{d->Width,
                             (d->Height == 0 ? 1 : d->Height) * (d->Depth == 0 ? 1 : d->Depth),
                             d->Format, d->NumChannels};
  return cuArrayCreate_v2(arr, &flat);
}

FAKE_API CUresult cuArrayDestroy(CUarray arr) {
  REQUIRE_INIT();
  std::pair<uint64_t, int> a;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_arrays.find(arr);
    if (it == g_arrays.end()) return CUDA_ERROR_INVALID_HANDLE;
    a = it->second;
    g_arrays.erase(it);
  }
  delete reinterpret_cast<char*>(arr);
  Uncharge(a.second, a.first);
  return CUDA_SUCCESS;
}

// ---- host memory (pinned, mapped) -----------------------------------------------------------

FAKE_API CUresult cuMemHostAlloc(void** pp, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (pp == nullptr || size == 0 || flags > 7) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> l(g_mu);
  g_host[p] = HostBlock{size, flags, false};
  *pp = p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeHost(void* p) {
  REQUIRE_INIT();
  HostBlock b;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_host.find(p);
    if (it == g_host.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
    b = it->second;
    g_host.erase(it);
  }
  munmap(p, b.size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (p == nullptr || size == 0 || flags > 15) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_host.count(p) != 0) return CUDA_ERROR_INVALID_VALUE;  // HOST_MEMORY_ALREADY_REGISTERED
  g_host[p] = HostBlock{size, flags, true};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostUnregister(void* p) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_host.find(p);
  if (it == g_host.end() || !it->second.registered) return CUDA_ERROR_INVALID_VALUE;
  g_host.erase(it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned flags) {
  REQUIRE_CTX();
  if (dptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_host.upper_bound(p);
  if (it == g_host.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  auto off = static_cast<uint64_t>(static_cast<char*>(p) - static_cast<char*>(it->first));
  if (off >= it->second.size || (it->second.flags & CU_MEMHOSTALLOC_DEVICEMAP) == 0)
    return CUDA_ERROR_INVALID_VALUE;
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the host address
  return CUDA_SUCCESS;
}

// ---- virtual memory management --------------------------------------------------------------

FAKE_API CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop,
                                                int /*option*/) {
  REQUIRE_INIT();
  if (g == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *g = kGranularity;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle* h, size_t size,
                              const CUmemAllocationProp* prop, unsigned long long flags) {
  REQUIRE_INIT();
  if (h == nullptr || prop == nullptr || flags != 0 || size == 0 || size % kGranularity != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  int dev = prop->location.id;
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = Charge(dev, size);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> l(g_mu);
  *h = g_next_handle++;
  g_handles[*h] = VmmHandle{size, dev, 1};
  return CUDA_SUCCESS;
}

namespace {
// REQUIRES: g_mu. Drops one reference; the memory is freed with the last one (documented: when
// every mapping is unmapped and the handle released).
void UnrefHandleLocked(CUmemGenericAllocationHandle h) {
  auto it = g_handles.find(h);
  if (--it->second.refs == 0) {
    Uncharge(it->second.dev, it->second.size);
    g_handles.erase(it);
  }
}
}  // namespace

FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_handles.find(h);
  if (it == g_handles.end()) return CUDA_ERROR_INVALID_VALUE;
  UnrefHandleLocked(h);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                      CUdeviceptr /*addr*/, unsigned long long flags) {
  REQUIRE_INIT();
  if (ptr == nullptr || size == 0 || size % kGranularity != 0 || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  *ptr = NewVa(size, std::max<size_t>(alignment, kGranularity));
  g_reserved_va[*ptr] = size;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_reserved_va.find(ptr);
  if (it == g_reserved_va.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  g_reserved_va.erase(it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle h, unsigned long long flags) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_handles.find(h);
  if (it == g_handles.end() || flags != 0 || offset != 0 || size != it->second.size ||
      g_mappings.count(ptr) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  g_mappings[ptr] = h;
  ++it->second.refs;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_mappings.find(ptr);
  if (it == g_mappings.end() || g_handles[it->second].size != size) return CUDA_ERROR_INVALID_VALUE;
  CUmemGenericAllocationHandle h = it->second;
  g_mappings.erase(it);
  UnrefHandleLocked(h);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc* d, size_t n) {
  REQUIRE_INIT();
  return d == nullptr || n == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// ---- stream-ordered allocator and pools ------------------------------------------------------

FAKE_API CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  REQUIRE_INIT();
  if (pool == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
      props->location.id >= static_cast<int>(g_devs.size()))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  auto* p = new Pool{props->location.id};
  g_pools.push_back(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto* p = reinterpret_cast<Pool*>(pool);
  auto it = std::find(g_pools.begin(), g_pools.end(), p);
  if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
  for (Pool* d : g_default_pool)
    if (d == p) return CUDA_ERROR_INVALID_VALUE;
  for (size_t d = 0; d < g_current_pool.size(); ++d)  // documented: the default becomes current
    if (g_current_pool[d] == p) g_current_pool[d] = g_default_pool[d];
  // Documented: outstanding allocations keep the pool alive until freed; the fake frees the
  // pool's unused reservation now and leaves the rest charged until the process ends.
  if (p->reserved > p->used) Uncharge(p->dev, p->reserved - p->used);
  p->reserved = p->used;
  if (p->used == 0) {
    g_pools.erase(it);
    delete p;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(g_default_pool[dev]);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> l(g_mu);
  *pool = reinterpret_cast<CUmemoryPool>(g_current_pool[dev]);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  REQUIRE_INIT();
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  auto* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> l(g_mu);
  if (std::find(g_pools.begin(), g_pools.end(), p) == g_pools.end() || p->dev != dev)
    return CUDA_ERROR_INVALID_VALUE;
  g_current_pool[dev] = p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value) {
  REQUIRE_INIT();
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> l(g_mu);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      p->threshold = *static_cast<cuuint64_t*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:  // only resettable to 0
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      p->reserved_high = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void* value) {
  REQUIRE_INIT();
  if (pool == nullptr || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> l(g_mu);
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *out = p->threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *out = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *out = p->reserved_high;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *out = p->used;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *out = p->used_high;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<Pool*>(pool);
  std::lock_guard<std::mutex> l(g_mu);
  uint64_t floor = std::max<uint64_t>(keep, p->used);
  if (p->reserved > floor) {
    Uncharge(p->dev, p->reserved - floor);
    p->reserved = floor;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                          CUstream) {
  REQUIRE_CTX();
  return AllocPool(dptr, size, pool);
}
FAKE_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                               CUstream s) {
  return cuMemAllocFromPoolAsync(dptr, size, pool, s);
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream) {
  REQUIRE_CTX();
  CUmemoryPool pool;
  {
    std::lock_guard<std::mutex> l(g_mu);
    pool = reinterpret_cast<CUmemoryPool>(g_current_pool[CurrentDev()]);
  }
  return AllocPool(dptr, size, pool);
}
FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream s) {
  return cuMemAllocAsync(dptr, size, s);
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || it->second.kind == Kind::kIpc || it->second.kind == Kind::kGraph)
    return CUDA_ERROR_INVALID_VALUE;
  Alloc a = it->second;
  g_allocs.erase(it);
  if (a.kind == Kind::kPool) {
    // Back to its pool; the physical memory stays reserved until a synchronize releases it.
    reinterpret_cast<Pool*>(a.pool)->used -= a.size;
  } else {
    Uncharge(a.dev, a.size);
  }
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  return cuMemFreeAsync(dptr, s);
}

// ---- IPC ----------------------------------------------------------------------------------

FAKE_API CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr dptr) {
  REQUIRE_INIT();
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || it->second.kind != Kind::kPlain) return CUDA_ERROR_INVALID_VALUE;
  IpcWire w{kIpcMagic, getpid(),       it->second.dev, gpupool::fakecuda::ProcStartTime(getpid()),
            dptr,      it->second.size};
  std::memset(h, 0, sizeof *h);
  std::memcpy(h->reserved, &w, sizeof w);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  REQUIRE_CTX();
  if (dptr == nullptr || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  IpcWire w;
  std::memcpy(&w, h.reserved, sizeof w);
  if (w.magic != kIpcMagic) return CUDA_ERROR_INVALID_VALUE;
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // not openable by its exporter
  if (gpupool::fakecuda::ProcStartTime(w.pid) != w.start_time) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  *dptr = NewVa(w.size);  // the exporter's memory, mapped: no new device memory
  g_allocs[*dptr] = Alloc{w.size, w.dev, Kind::kIpc, nullptr};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || it->second.kind != Kind::kIpc) return CUDA_ERROR_INVALID_VALUE;
  g_allocs.erase(it);
  return CUDA_SUCCESS;
}

// ---- streams, events, modules, launches -------------------------------------------------------

FAKE_API CUresult cuStreamCreate(CUstream* s, unsigned) {
  REQUIRE_CTX();
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *s = reinterpret_cast<CUstream>(new char(0));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamDestroy_v2(CUstream s) {
  REQUIRE_INIT();
  delete reinterpret_cast<char*>(s);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamSynchronize(CUstream) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }
FAKE_API CUresult cuStreamQuery(CUstream) {
  REQUIRE_INIT();
  return CUDA_SUCCESS;
}

namespace {
// REQUIRES: g_mu.
void ForgetPendingLocked(Event* e) {
  if (auto* c = reinterpret_cast<Ctx*>(t_ctx))
    c->pending.erase(std::remove(c->pending.begin(), c->pending.end(), e), c->pending.end());
}
// REQUIRES: g_mu. An event still waiting for its context counts as processed when recorded
// (nothing of its context followed it onto the device).
uint64_t SettleLocked(CUevent h) {
  auto* e = reinterpret_cast<Event*>(h);
  if (e->stamp_ns == 0 && e->recorded_ns != 0) {
    e->stamp_ns = e->recorded_ns;
    ForgetPendingLocked(e);
  }
  return e->stamp_ns;
}
// Whether the current context is the one resident on the device (it ran the last kernel and
// none runs now): then an event it records is processed at once.
// An event recorded by the resident context that is not the marker right after its kernel
// (the "end" of that kernel) precedes more work: the context keeps the device for it.
bool ResidentNow() {
  DeviceState* s = g_devs[CurrentDev()];
  auto* c = reinterpret_cast<Ctx*>(t_ctx);
  if (pthread_mutex_trylock(&s->engine) != 0) return false;
  bool mine = s->engine_pid == getpid() && s->engine_ctx == reinterpret_cast<uint64_t>(t_ctx);
  if (mine && !c->just_ran) s->engine_until_ns = NowNs() + kQueuedWorkNs;
  c->just_ran = false;
  pthread_mutex_unlock(&s->engine);
  return mine;
}
}  // namespace

FAKE_API CUresult cuEventCreate(CUevent* e, unsigned) {
  REQUIRE_CTX();
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new Event{0, 0});
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventRecord(CUevent h, CUstream) {
  REQUIRE_CTX();
  if (h == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(h);
  bool resident = ResidentNow();
  std::lock_guard<std::mutex> l(g_mu);
  ForgetPendingLocked(e);
  e->recorded_ns = NowNs();
  e->stamp_ns = resident ? e->recorded_ns : 0;
  if (!resident) reinterpret_cast<Ctx*>(t_ctx)->pending.push_back(e);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }
FAKE_API CUresult cuEventSynchronize(CUevent e) {
  REQUIRE_INIT();
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> l(g_mu);
  SettleLocked(e);
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventQuery(CUevent e) {
  REQUIRE_INIT();
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> l(g_mu);
  SettleLocked(e);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  REQUIRE_INIT();
  if (ms == nullptr || a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  uint64_t ta = SettleLocked(a), tb = SettleLocked(b);
  if (ta == 0 || tb == 0) return CUDA_ERROR_INVALID_HANDLE;  // never recorded
  *ms = static_cast<float>((static_cast<double>(tb) - static_cast<double>(ta)) / 1e6);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventDestroy_v2(CUevent e) {
  REQUIRE_INIT();
  {
    std::lock_guard<std::mutex> l(g_mu);
    ForgetPendingLocked(reinterpret_cast<Event*>(e));
  }
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  REQUIRE_CTX();
  if (m == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *m = reinterpret_cast<CUmodule>(new char(0));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleUnload(CUmodule m) {
  REQUIRE_INIT();
  delete reinterpret_cast<char*>(m);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  REQUIRE_INIT();
  if (f == nullptr || m == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t us = EnvU64("GPUPOOL_FAKE_CUDA_KERNEL_US", 50);
  const char* us_at = strstr(name, "us");
  const char* underscore = strrchr(name, '_');
  if (underscore != nullptr && us_at != nullptr && us_at > underscore && us_at[2] == 0)
    us = strtoull(underscore + 1, nullptr, 10);
  *f = reinterpret_cast<CUfunction>(new Function{us * 1000});
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned, CUstream, void**, void**) {
  REQUIRE_CTX();
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (gx * gy * gz == 0 || bx * by * bz == 0 || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  RunKernel(f);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                      unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                      CUstream s, void** p, void** e) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}
FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                        c->blockDimZ, c->sharedMemBytes, c->hStream, p, e);
}
FAKE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return cuLaunchKernelEx(c, f, p, e);
}
FAKE_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                            CUstream s, void** p) {
  REQUIRE_CTX();
  // Documented: the grid must fit on the device at once (here: one block per SM at most).
  if (static_cast<uint64_t>(gx) * gy * gz > static_cast<uint64_t>(g_profiles[CurrentDev()].sms))
    return 720;  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, nullptr);
}
FAKE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                 unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                                 unsigned sh, CUstream s, void** p) {
  return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, sh, s, p);
}

// ---- graphs --------------------------------------------------------------------------------

FAKE_API CUresult cuGraphCreate(CUgraph* g, unsigned flags) {
  REQUIRE_INIT();
  if (g == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *g = reinterpret_cast<CUgraph>(new Graph);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphDestroy(CUgraph g) {
  REQUIRE_INIT();
  auto* graph = reinterpret_cast<Graph*>(g);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (Node* n : graph->nodes) delete n;
  delete graph;
  return CUDA_SUCCESS;
}

namespace {
CUresult AddNode(CUgraphNode* out, CUgraph g, Node* n) {
  if (out == nullptr || g == nullptr) {
    delete n;
    return CUDA_ERROR_INVALID_VALUE;
  }
  reinterpret_cast<Graph*>(g)->nodes.push_back(n);
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                          const CUDA_KERNEL_NODE_PARAMS* p) {
  REQUIRE_INIT();
  if (p == nullptr || p->func == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddNode(out, g, new Node{Node::kKernel, p->func, 0, 0});
}

FAKE_API CUresult cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                         CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  REQUIRE_INIT();
  if (p == nullptr || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> l(g_mu);
    p->dptr = NewVa(p->bytesize);  // fixed for the graph's lifetime, as documented
  }
  return AddNode(out, g, new Node{Node::kAlloc, nullptr, p->bytesize, p->dptr});
}

FAKE_API CUresult cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                        CUdeviceptr dptr) {
  REQUIRE_INIT();
  return AddNode(out, g, new Node{Node::kFree, nullptr, 0, dptr});
}

FAKE_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  REQUIRE_INIT();
  if (g == nullptr || count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& all = reinterpret_cast<Graph*>(g)->nodes;
  if (nodes != nullptr) {  // documented: at most *count are written, *count becomes the number
    size_t n = std::min(*count, all.size());
    for (size_t i = 0; i < n; ++i) nodes[i] = reinterpret_cast<CUgraphNode>(all[i]);
    *count = n;
  } else {
    *count = all.size();
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphNodeGetType(CUgraphNode node, int* type) {
  REQUIRE_INIT();
  if (node == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (reinterpret_cast<Node*>(node)->type) {
    case Node::kKernel:
      *type = CU_GRAPH_NODE_TYPE_KERNEL;
      break;
    case Node::kAlloc:
      *type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
      break;
    case Node::kFree:
      *type = CU_GRAPH_NODE_TYPE_MEM_FREE;
      break;
    default:
      *type = CU_GRAPH_NODE_TYPE_EMPTY;
      break;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  REQUIRE_INIT();
  auto* n = reinterpret_cast<Node*>(node);
  if (n == nullptr || out == nullptr || n->type != Node::kAlloc) return CUDA_ERROR_INVALID_VALUE;
  std::memset(out, 0, sizeof *out);
  out->bytesize = n->bytes;
  out->dptr = n->dptr;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g, unsigned long long) {
  REQUIRE_CTX();
  if (out == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new Exec{CurrentDev(), {}, 0};
  for (Node* n : reinterpret_cast<Graph*>(g)->nodes) {
    if (n->type == Node::kKernel) e->kernels.push_back(n->func);
    if (n->type == Node::kAlloc) e->alloc_bytes += n->bytes;
  }
  if (e->alloc_bytes != 0) {
    CUresult r = Charge(e->dev, e->alloc_bytes);
    if (r != CUDA_SUCCESS) {
      delete e;
      return r;
    }
    std::lock_guard<std::mutex> l(g_mu);
    g_graph_mem[e->dev] += e->alloc_bytes;
  }
  *out = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec x, CUstream) {
  REQUIRE_CTX();
  if (x == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (CUfunction f : reinterpret_cast<Exec*>(x)->kernels) RunKernel(f);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { return cuGraphLaunch(x, s); }

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec x) {
  REQUIRE_INIT();
  auto* e = reinterpret_cast<Exec*>(x);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e->alloc_bytes != 0) {
    Uncharge(e->dev, e->alloc_bytes);
    std::lock_guard<std::mutex> l(g_mu);
    g_graph_mem[e->dev] -= e->alloc_bytes;
  }
  delete e;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  REQUIRE_INIT();
  // Memory of live executable graphs stays; the fake keeps no other graph memory.
  return dev < 0 || dev >= static_cast<int>(g_devs.size()) ? CUDA_ERROR_INVALID_DEVICE
                                                           : CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, int attr, void* value) {
  REQUIRE_INIT();
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr || attr < 0 || attr > 3) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  *static_cast<cuuint64_t*>(value) = g_graph_mem[dev];
  return CUDA_SUCCESS;
}

// ---- entry points ----------------------------------------------------------------------------

namespace {
struct Entry {
  const char* name;
  void* fn;
  void* ptds;  // the per-thread-default-stream variant, when the function takes a stream
  int since;   // the CUDA version that introduced it
};
#define E(name, since) \
  { #name, reinterpret_cast < void*>(&name), nullptr, since }
#define EV(name, impl, since) \
  { #name, reinterpret_cast < void*>(&impl), nullptr, since }
#define EP(name, since) \
  { #name, reinterpret_cast < void*>(&name), reinterpret_cast < void*>(&name##_ptsz), since }
}  // namespace

FAKE_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);

namespace {
const Entry kEntries[] = {
    E(cuInit, 2000),
    E(cuDriverGetVersion, 2020),
    E(cuDeviceGetCount, 2000),
    E(cuDeviceGet, 2000),
    E(cuDeviceGetName, 2000),
    EV(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020),
    E(cuDeviceGetAttribute, 2000),
    EV(cuCtxCreate, cuCtxCreate_v2, 3020),
    EV(cuCtxDestroy, cuCtxDestroy_v2, 4000),
    E(cuCtxSetCurrent, 4000),
    E(cuCtxGetCurrent, 4000),
    E(cuCtxGetDevice, 2000),
    E(cuCtxSynchronize, 2000),
    E(cuDevicePrimaryCtxRetain, 7000),
    EV(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000),
    E(cuDevicePrimaryCtxGetState, 7000),
    EV(cuMemGetInfo, cuMemGetInfo_v2, 3020),
    EV(cuMemAlloc, cuMemAlloc_v2, 3020),
    EV(cuMemAllocPitch, cuMemAllocPitch_v2, 3020),
    E(cuMemAllocManaged, 6000),
    EV(cuMemFree, cuMemFree_v2, 3020),
    EV(cuMemGetAddressRange, cuMemGetAddressRange_v2, 3020),
    EV(cuArrayCreate, cuArrayCreate_v2, 3020),
    E(cuArrayDestroy, 2000),
    EV(cuArray3DCreate, cuArray3DCreate_v2, 3020),
    // Drivers also answer some ABI names verbatim; the interposer must not depend on names.
    E(cuMemAlloc_v2, 3020),
    E(cuMemHostAlloc, 2020),
    E(cuMemFreeHost, 2000),
    EV(cuMemHostRegister, cuMemHostRegister_v2, 6050),
    E(cuMemHostUnregister, 4000),
    EV(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 3020),
    E(cuMemGetAllocationGranularity, 10020),
    E(cuMemCreate, 10020),
    E(cuMemRelease, 10020),
    E(cuMemAddressReserve, 10020),
    E(cuMemAddressFree, 10020),
    E(cuMemMap, 10020),
    E(cuMemUnmap, 10020),
    E(cuMemSetAccess, 10020),
    E(cuMemPoolCreate, 11020),
    E(cuMemPoolDestroy, 11020),
    E(cuDeviceGetDefaultMemPool, 11020),
    E(cuDeviceGetMemPool, 11020),
    E(cuDeviceSetMemPool, 11020),
    E(cuMemPoolSetAttribute, 11020),
    E(cuMemPoolGetAttribute, 11020),
    E(cuMemPoolTrimTo, 11020),
    EP(cuMemAllocFromPoolAsync, 11020),
    EP(cuMemAllocAsync, 11020),
    EP(cuMemFreeAsync, 11020),
    E(cuIpcGetMemHandle, 4010),
    EV(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2, 11000),
    E(cuIpcCloseMemHandle, 4010),
    E(cuStreamCreate, 2000),
    EV(cuStreamDestroy, cuStreamDestroy_v2, 4000),
    EP(cuStreamSynchronize, 2000),
    E(cuStreamQuery, 2000),
    E(cuEventCreate, 2000),
    EP(cuEventRecord, 2000),
    E(cuEventSynchronize, 2000),
    E(cuEventQuery, 2000),
    E(cuEventElapsedTime, 2000),
    EV(cuEventDestroy, cuEventDestroy_v2, 4000),
    E(cuModuleLoadData, 2000),
    E(cuModuleUnload, 2000),
    E(cuModuleGetFunction, 2000),
    EP(cuLaunchKernel, 4000),
    EP(cuLaunchKernelEx, 11060),
    EP(cuLaunchCooperativeKernel, 9000),
    E(cuGraphCreate, 10000),
    E(cuGraphDestroy, 10000),
    EV(cuGraphAddKernelNode, cuGraphAddKernelNode_v2, 12000),
    E(cuGraphAddMemAllocNode, 11040),
    E(cuGraphAddMemFreeNode, 11040),
    E(cuGraphGetNodes, 10000),
    E(cuGraphNodeGetType, 10000),
    E(cuGraphMemAllocNodeGetParams, 11040),
    EV(cuGraphInstantiate, cuGraphInstantiateWithFlags, 12000),
    E(cuGraphInstantiateWithFlags, 11040),
    EP(cuGraphLaunch, 10000),
    E(cuGraphExecDestroy, 10000),
    E(cuDeviceGraphMemTrim, 11040),
    E(cuDeviceGetGraphMemAttribute, 11040),
    E(cuGetProcAddress, 11030),
};
#undef E
#undef EV
#undef EP
}  // namespace

// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DRIVER__ENTRY__POINT.html: `symbol` is
// the base name ("cuMemAlloc"); the version picks the ABI variant (cuMemAlloc_v2 since 3.2);
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM picks the _ptsz/_ptds variant where one exists.
FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  for (const Entry& e : kEntries) {
    if (strcmp(e.name, symbol) != 0) continue;
    if (version < e.since) {
      if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && e.ptds != nullptr
               ? e.ptds
               : e.fn;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
