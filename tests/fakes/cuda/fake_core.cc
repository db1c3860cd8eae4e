// The fake libcuda.so.1 (see docs/interposer.md, "The fakes"): the driver API surface gpupool's
// interposer hooks, following NVIDIA's documented behaviour
// (https://docs.nvidia.com/cuda/cuda-driver-api/) on simulated devices.
//
// Devices: GPUPOOL_FAKE_CUDA_DEVICES = "name,total_bytes,sm_count,context_bytes[;…]" (default one
// 64 MiB device, 8 SMs, 1 MiB per context). Device memory truth lives in shared memory under
// GPUPOOL_FAKE_CUDA_STATE (fake_state.h), charged per process, freed when the process ends.
// Kernels: cuModuleGetFunction accepts any name (and a launch any parameters); a name ending in
// "_<N>us" runs N µs of device time, any other GPUPOOL_FAKE_CUDA_KERNEL_US (default 50). The
// device runs one context's kernels at a time and time-slices between the contexts of all
// processes (fake_engine.cc), as an H200 with driver 580 and no MPS did: a context keeps the device
// while no other waits; once another waits and it has had the device for a timeslice
// (GPUPOOL_FAKE_CUDA_TIMESLICE_US, default 2000; the H200's was ~2.26 ms) it is preempted, in the
// middle of a kernel if need be, and that kernel's remaining time runs at the context's next turn.
// An event is stamped when its context has the device, so the events around a preempted kernel
// span the other context's slice too (as they did on the H200), while the per-process GPU time in
// the truth is only the time the process's own kernels ran.
//
// Deliberate simplifications: every stream is synchronous (a launch returns when its kernel has
// run, so cuStreamSynchronize only releases pool memory); managed memory is resident on the
// device; graph memory is physically allocated at instantiation and freed with the executable
// graph; the _v1 (32-bit CUdeviceptr) entry points are not exported.
//
// This file: the process-local state, the device truth, initialization, devices and contexts.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

namespace gpupool::fakecuda::driver {

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
std::vector<uint8_t*> g_vram;

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = getenv(name);
  return v != nullptr && *v != 0 ? strtoull(v, nullptr, 10) : def;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The memory of a backed device (fake_state.h): a sparse file every process maps shared.
uint8_t* MapVram(const char* dir, int index, DeviceState* s) {
  if (!gpupool::fakecuda::Backed(s)) return nullptr;
  const std::string path = std::string(dir) + "/device" + std::to_string(index) + ".vram";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 ||
      (st.st_size < static_cast<off_t>(s->total) && ::ftruncate(fd, s->total) != 0)) {
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, s->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

// The devices this process enumerates, in ordinal order. GPUPOOL_FAKE_CUDA_DEVICES lists the
// node's devices; an item "mig:<name>,<bytes>,<sms>,<context bytes>[,<parent GPU>]" is a MIG
// instance of that GPU (default 0), with memory of its own. Which of them
// a process sees follows CUDA_VISIBLE_DEVICES as NVIDIA documents it (CUDA C++ Programming
// Guide, "CUDA Environment Variables"; MIG User Guide, "CUDA Device Enumeration",
// https://docs.nvidia.com/datacenter/tesla/mig-user-guide/): unset, every whole GPU and no MIG
// instance; set, the listed devices in that order — indices or GPU-<uuid>, and MIG-<uuid> — up to
// the first entry that names none, and at most one MIG instance per process.
void ParseProfiles() {
  const char* spec = getenv("GPUPOOL_FAKE_CUDA_DEVICES");
  std::string s = spec != nullptr && *spec != 0 ? spec : "gpupool fake 64MiB,67108864,8,1048576";
  std::vector<Profile> gpus, migs;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(';', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const bool mig = item.rfind("mig:", 0) == 0;
    if (mig) item = item.substr(4);
    Profile p{"", 0, 1, 0};
    size_t c1 = item.find(','), c2 = item.find(',', c1 + 1), c3 = item.find(',', c2 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos || c3 == std::string::npos) continue;
    p.name = item.substr(0, c1);
    p.total = strtoull(item.c_str() + c1 + 1, nullptr, 10);
    p.sms = atoi(item.c_str() + c2 + 1);
    p.context_bytes = strtoull(item.c_str() + c3 + 1, nullptr, 10);
    if (mig) {
      size_t c4 = item.find(',', c3 + 1);
      p.parent = c4 == std::string::npos ? 0 : atoi(item.c_str() + c4 + 1);
    }
    p.global = mig ? gpupool::fakecuda::kMigBase + static_cast<int>(migs.size())
                   : static_cast<int>(gpus.size());
    (mig ? migs : gpus).push_back(p);
  }
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) {
    g_profiles = gpus;
    return;
  }
  std::string list = visible;
  bool have_mig = false;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string token = list.substr(at, comma - at);
    at = comma + 1;
    const Profile* found = nullptr;
    for (const auto* set : {&gpus, &migs})
      for (const Profile& p : *set)
        if (token == gpupool::fakecuda::FakeUuid(p.global)) found = &p;
    if (found == nullptr && !token.empty() &&
        token.find_first_not_of("0123456789") == std::string::npos) {
      size_t i = strtoul(token.c_str(), nullptr, 10);
      if (i < gpus.size()) found = &gpus[i];
    }
    if (found == nullptr) return;  // enumeration stops at the first entry that names no device
    if (gpupool::fakecuda::IsMig(found->global)) {
      if (have_mig) continue;  // one MIG instance per process
      have_mig = true;
    }
    g_profiles.push_back(*found);
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
CUdeviceptr NewVa(uint64_t size, uint64_t align) {
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

CUresult AllocPlain(CUdeviceptr* dptr, uint64_t size, Kind kind) {
  if (dptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int dev = CurrentDev();
  CUresult r = Charge(dev, size);
  if (r != CUDA_SUCCESS) return r;
  std::vector<uint32_t> pages = TakePages(dev, size);
  std::lock_guard<std::mutex> l(g_mu);
  *dptr = NewVa(size);
  g_allocs[*dptr] = Alloc{size, dev, kind, nullptr, std::move(pages)};
  return CUDA_SUCCESS;
}

std::vector<uint32_t> TakePages(int dev, uint64_t size) {
  std::vector<uint32_t> pages;
  if (g_vram[dev] == nullptr) return pages;
  DeviceState* s = g_devs[dev];
  const uint64_t want = (size + gpupool::fakecuda::kPageBytes - 1) / gpupool::fakecuda::kPageBytes;
  const uint64_t count = s->total / gpupool::fakecuda::kPageBytes;
  const int32_t me = getpid();
  gpupool::fakecuda::Lock(&s->mu);
  // Lowest free pages first, as an allocator hands back what the last process freed.
  for (uint64_t i = 0; i < count && pages.size() < want; ++i) {
    if (s->page_owner[i] == 0) pages.push_back(static_cast<uint32_t>(i));
  }
  if (pages.size() < want) {
    pages.clear();  // too small to back (many tiny allocations): accounted, without contents
  } else {
    for (uint32_t p : pages) s->page_owner[p] = me;
  }
  pthread_mutex_unlock(&s->mu);
  return pages;
}

void GivePages(int dev, const std::vector<uint32_t>& pages) {
  if (pages.empty()) return;
  DeviceState* s = g_devs[dev];
  const int32_t me = getpid();
  gpupool::fakecuda::Lock(&s->mu);
  for (uint32_t p : pages) {
    if (s->page_owner[p] == me) s->page_owner[p] = 0;  // its bytes stay: memory is not cleared
  }
  pthread_mutex_unlock(&s->mu);
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

}  // namespace gpupool::fakecuda::driver

// ---- initialization, devices ----------------------------------------------------------------

FAKE_API CUresult cuInit(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_init) return CUDA_SUCCESS;
  const char* dir = getenv("GPUPOOL_FAKE_CUDA_STATE");
  if (dir == nullptr || *dir == 0) return CUDA_ERROR_NO_DEVICE;
  ParseProfiles();
  for (size_t i = 0; i < g_profiles.size(); ++i) {
    const int global = g_profiles[i].global;  // ordinals are this process's; truth is shared
    DeviceState* s = gpupool::fakecuda::MapDevice(dir, global, g_profiles[i].total);
    if (s == nullptr) return CUDA_ERROR_OPERATING_SYSTEM;
    g_devs.push_back(s);
    g_vram.push_back(MapVram(dir, global, s));
    auto* pool = new Pool{static_cast<int>(i)};
    g_pools.push_back(pool);
    g_default_pool.push_back(pool);
    g_current_pool.push_back(pool);
    g_primary.push_back(nullptr);
    g_primary_refs.push_back(0);
    g_graph_mem.push_back(0);
  }
  if (g_devs.empty()) return CUDA_ERROR_NO_DEVICE;
  JoinMpsServer();  // an MPS client waits here while a server of another uid runs (fake_mps.cc)
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
  if (CUresult r = CaptureProhibitsContextSyncLocked(); r != CUDA_SUCCESS) return r;
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}

// CUDA 13.0 (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html): synchronizes the
// named context, the current one when `ctx` is NULL. Every stream of this fake is synchronous, so
// either way it only releases pool memory, as cuCtxSynchronize does.
FAKE_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (ctx != nullptr) {
    REQUIRE_INIT();
    std::lock_guard<std::mutex> l(g_mu);
    if (CUresult r = CaptureProhibitsContextSyncLocked(); r != CUDA_SUCCESS) return r;
    ReleasePoolsLocked();
    return CUDA_SUCCESS;
  }
  return cuCtxSynchronize();
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

// The v1 ABI (CUDA 7.0): the same call for this fake (v2 changed only which errors it returns).
FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
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
