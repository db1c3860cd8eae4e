// Device memory hooks: reserve in the ledger before the driver allocates, release after it frees.
//
// Invariant: for every kind of memory, the ledger holds at least what the driver has allocated
// for this process at any instant (the charge rises before the driver's figure and falls after
// it). Plain allocations may spill to mapped pinned host memory when the grant has spill; VMM,
// IPC, pools, arrays, managed memory, graphs and contexts never spill.
#include <map>
#include <mutex>
#include <vector>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

struct Plain {
  uint64_t bytes;
  void* host;  // non-null: spilled to this pinned host block
};
struct VmmHandle {
  uint64_t bytes;
  int refs;  // the handle plus one per mapping, as the driver counts them
};

std::mutex g_mu;  // guards the tables below
std::map<CUdeviceptr, Plain> g_plain;
std::map<CUarray, uint64_t> g_arrays;
std::map<CUmemGenericAllocationHandle, VmmHandle> g_vmm;
std::map<CUdeviceptr, CUmemGenericAllocationHandle> g_maps;
std::map<CUdeviceptr, uint64_t> g_ipc;
std::map<CUcontext, uint64_t> g_ctx;
std::map<CUgraphExec, uint64_t> g_execs;
std::map<int, bool> g_primary_charged;
std::map<int, CUcontext> g_primary_ctx;

std::mutex g_pool_mu;                      // guards g_pools; held across a pool allocation
std::map<CUmemoryPool, uint64_t> g_pools;  // what each pool is charged

std::mutex g_primary_mu;  // serialises primary context retain/release

uint64_t ContextBytes() {
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  return l != nullptr ? l->hello().context_bytes : 0;
}

void Track(CUdeviceptr p, uint64_t bytes, void* host) {
  std::lock_guard<std::mutex> l(g_mu);
  g_plain[p] = Plain{bytes, host};
}

// A plain allocation past the VRAM grant, from pinned host memory mapped into the device's
// address space (unified addressing: the device pointer is the host address).
CUresult Spill(CUdeviceptr* dptr, size_t size) {
  auto host_alloc = REAL(cuMemHostAlloc);
  auto host_free = REAL(cuMemFreeHost);
  auto device_ptr = REAL(cuMemHostGetDevicePointer_v2);
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  if (l == nullptr || l->hello().spill_limit == 0 || host_alloc == nullptr ||
      host_free == nullptr || device_ptr == nullptr || !gi::ReserveSpill(size))
    return CUDA_ERROR_OUT_OF_MEMORY;
  void* host = nullptr;
  CUresult r = host_alloc(&host, size, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_SUCCESS) {
    r = device_ptr(dptr, host, 0);
    if (r != CUDA_SUCCESS) host_free(host);
  }
  if (r != CUDA_SUCCESS) {
    gi::ReleaseSpill(size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Track(*dptr, size, host);
  return CUDA_SUCCESS;
}

// Frees a tracked plain allocation through `free_fn`, releasing its charge after the driver
// has freed it; false if `p` is not one.
template <typename Free>
bool FreePlain(CUdeviceptr p, Free free_fn, CUresult* r) {
  Plain a;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_plain.find(p);
    if (it == g_plain.end()) return false;
    a = it->second;
    g_plain.erase(it);
  }
  *r = a.host != nullptr ? REAL(cuMemFreeHost)(a.host) : free_fn(p);
  if (*r == CUDA_SUCCESS) {
    if (a.host != nullptr) {
      gi::ReleaseSpill(a.bytes);
    } else {
      gi::ReleaseVram(a.bytes);
    }
  } else {
    std::lock_guard<std::mutex> l(g_mu);
    g_plain[p] = a;
  }
  return true;
}

uint64_t PoolReserved(CUmemoryPool pool) {
  cuuint64_t v = 0;
  auto get = REAL(cuMemPoolGetAttribute);
  if (get == nullptr || get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return UINT64_MAX;  // unknown: keep the charge
  return v;
}

// REQUIRES: g_pool_mu. Lowers the pool's charge to what the driver reserves.
void ResyncLocked(CUmemoryPool pool, uint64_t* charged) {
  uint64_t reserved = PoolReserved(pool);
  if (reserved < *charged) {
    gi::ReleaseVram(*charged - reserved);
    *charged = reserved;
  }
}

template <typename Alloc>
CUresult PoolAlloc(CUmemoryPool pool, size_t size, Alloc alloc) {
  std::lock_guard<std::mutex> l(g_pool_mu);
  uint64_t& charged = g_pools[pool];
  if (!gi::ReserveVram(size)) {
    // The driver trims its pools before failing; so does the ledger's view of them.
    for (auto& [p, c] : g_pools) ResyncLocked(p, &c);
    auto trim = REAL(cuMemPoolTrimTo);
    cuuint64_t used = 0;
    auto get = REAL(cuMemPoolGetAttribute);
    if (trim != nullptr && get != nullptr &&
        get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS)
      trim(pool, used);
    ResyncLocked(pool, &charged);
    if (!gi::ReserveVram(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  charged += size;
  CUresult r = alloc();
  ResyncLocked(pool, &charged);
  return r;
}

// The pool cuMemAllocAsync allocates from: the device's current pool (cuDeviceSetMemPool's).
CUmemoryPool CurrentPool() {
  CUdevice dev = 0;
  CUmemoryPool pool = nullptr;
  auto get_dev = REAL(cuCtxGetDevice);
  auto get_pool = REAL(cuDeviceGetMemPool);
  if (get_dev == nullptr || get_pool == nullptr || get_dev(&dev) != CUDA_SUCCESS ||
      get_pool(&pool, dev) != CUDA_SUCCESS)
    return nullptr;
  return pool;
}

// The bytes of the memory-allocation nodes of `graph`: what instantiating it allocates.
bool GraphAllocBytes(CUgraph graph, uint64_t* bytes) {
  auto nodes = REAL(cuGraphGetNodes);
  auto type = REAL(cuGraphNodeGetType);
  auto params = REAL(cuGraphMemAllocNodeGetParams);
  if (nodes == nullptr || type == nullptr || params == nullptr) return false;
  size_t n = 0;
  if (nodes(graph, nullptr, &n) != CUDA_SUCCESS) return false;
  std::vector<CUgraphNode> all(n);
  if (n != 0 && nodes(graph, all.data(), &n) != CUDA_SUCCESS) return false;
  *bytes = 0;
  for (size_t i = 0; i < n && i < all.size(); ++i) {
    int t = -1;
    if (type(all[i], &t) != CUDA_SUCCESS) return false;
    if (t != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    if (params(all[i], &p) != CUDA_SUCCESS) return false;
    *bytes += p.bytesize;
  }
  return true;
}

template <typename Instantiate>
CUresult GraphInstantiate(CUgraphExec* exec, CUgraph graph, Instantiate inst) {
  uint64_t bytes = 0;
  if (exec == nullptr || graph == nullptr) return inst();
  if (!GraphAllocBytes(graph, &bytes)) return CUDA_ERROR_NOT_SUPPORTED;  // cannot count: refuse
  if (bytes != 0 && !gi::ReserveVram(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = inst();
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(bytes);
    return r;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_execs[*exec] = bytes;
  return r;
}

template <typename Create>
CUresult ContextCreate(CUcontext* pctx, Create create) {
  uint64_t bytes = ContextBytes();
  if (gi::Ledger() == nullptr || (bytes != 0 && !gi::ReserveVram(bytes)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = create();
  if (r != CUDA_SUCCESS || pctx == nullptr) {
    gi::ReleaseVram(bytes);
    return r;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_ctx[*pctx] = bytes;
  return r;
}

// REQUIRES: g_primary_mu. After a release or reset: uncharge if the driver destroyed it.
void SyncPrimary(CUdevice dev) {
  unsigned flags = 0;
  int active = 1;
  auto state = REAL(cuDevicePrimaryCtxGetState);
  if (state == nullptr || state(dev, &flags, &active) != CUDA_SUCCESS || active != 0) return;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_primary_charged[dev]) {
    g_primary_charged[dev] = false;
    gi::ReleaseVram(ContextBytes());
  }
  gi::ForgetContext(g_primary_ctx[dev]);
}

}  // namespace

void gi::ResyncPools() {
  std::lock_guard<std::mutex> l(g_pool_mu);
  for (auto& [pool, charged] : g_pools) ResyncLocked(pool, &charged);
}

#define REAL_OR_FAIL(fn) \
  auto real = REAL(fn);  \
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND

// ---- queries --------------------------------------------------------------------------------

// The slice, not the device: total = the VRAM grant, free = grant − the task's usage (and never
// more than the device really has free).
GPUPOOL_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult r = real(free_bytes, total);
  if (r != CUDA_SUCCESS) return r;
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  gpupool::ledger::Response q;
  if (l == nullptr || !l->Call(gpupool::ledger::Op::kQuery, gpupool::ledger::Kind::kNone, 0, &q))
    return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t slice_free = q.vram_limit - q.vram_used;
  *free_bytes = slice_free < *free_bytes ? slice_free : *free_bytes;
  *total = q.vram_limit;
  return CUDA_SUCCESS;
}

// ---- plain, pitch, managed, arrays ------------------------------------------------------------

GPUPOOL_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t size) {
  REAL_OR_FAIL(cuMemAlloc_v2);
  if (dptr == nullptr || size == 0) return real(dptr, size);  // the driver's own error
  if (!gi::ReserveVram(size)) return Spill(dptr, size);
  CUresult r = real(dptr, size);
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(size);
    return r;
  }
  Track(*dptr, size, nullptr);
  return r;
}

GPUPOOL_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                           size_t height, unsigned elem) {
  REAL_OR_FAIL(cuMemAllocPitch_v2);
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0 || width > (1ull << 48))
    return real(dptr, pitch, width, height, elem);
  // The driver picks the pitch; reserve for a 512-byte alignment (what drivers use), then settle.
  uint64_t row = (width + 511) / 512 * 512;
  if (height > UINT64_MAX / row) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t reserved = row * height;
  if (!gi::ReserveVram(reserved)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(dptr, pitch, width, height, elem);
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(reserved);
    return r;
  }
  uint64_t bytes = static_cast<uint64_t>(*pitch) * height;
  if (bytes < reserved) gi::ReleaseVram(reserved - bytes);
  if (bytes > reserved && !gi::ReserveVram(bytes - reserved)) {
    REAL(cuMemFree_v2)(*dptr);  // wider than any driver has padded: refuse, briefly over
    gi::ReleaseVram(reserved);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Track(*dptr, bytes, nullptr);
  return r;
}

GPUPOOL_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned flags) {
  REAL_OR_FAIL(cuMemAllocManaged);
  if (dptr == nullptr || size == 0) return real(dptr, size, flags);
  if (!gi::ReserveVram(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(dptr, size, flags);
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(size);
    return r;
  }
  Track(*dptr, size, nullptr);
  return r;
}

GPUPOOL_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL_OR_FAIL(cuMemFree_v2);
  CUresult r;
  if (FreePlain(dptr, real, &r)) return r;
  return real(dptr);  // pool memory (stays in its pool) or not ours
}

GPUPOOL_EXPORT CUresult cuArrayCreate_v2(CUarray* arr, const CUDA_ARRAY_DESCRIPTOR* d) {
  REAL_OR_FAIL(cuArrayCreate_v2);
  if (arr == nullptr || d == nullptr) return real(arr, d);
  uint64_t elem = 0;
  switch (d->Format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      elem = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      elem = 2;
      break;
    default:
      elem = 4;
      break;  // 32-bit formats; unknown ones are charged as the widest
  }
  uint64_t w = d->Width, h = d->Height == 0 ? 1 : d->Height, c = d->NumChannels;
  if (w > (1ull << 32) || h > (1ull << 32) || c > 4) return real(arr, d);  // the driver refuses
  uint64_t bytes = elem * c * w * h;
  if (!gi::ReserveVram(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(arr, d);
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(bytes);
    return r;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_arrays[*arr] = bytes;
  return r;
}

GPUPOOL_EXPORT CUresult cuArrayDestroy(CUarray arr) {
  REAL_OR_FAIL(cuArrayDestroy);
  CUresult r = real(arr);
  if (r != CUDA_SUCCESS) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_arrays.find(arr);
    if (it != g_arrays.end()) {
      bytes = it->second;
      g_arrays.erase(it);
    }
  }
  gi::ReleaseVram(bytes);
  return r;
}

// ---- virtual memory management ------------------------------------------------------------

GPUPOOL_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* h, size_t size,
                                    const CUmemAllocationProp* prop, unsigned long long flags) {
  REAL_OR_FAIL(cuMemCreate);
  if (h == nullptr || size == 0) return real(h, size, prop, flags);
  if (!gi::ReserveVram(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(h, size, prop, flags);
  if (r != CUDA_SUCCESS) {
    gi::ReleaseVram(size);
    return r;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_vmm[*h] = VmmHandle{size, 1};
  return r;
}

namespace {
void UnrefVmm(CUmemGenericAllocationHandle h) {
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_vmm.find(h);
    if (it == g_vmm.end()) return;
    if (--it->second.refs == 0) {
      bytes = it->second.bytes;
      g_vmm.erase(it);
    }
  }
  gi::ReleaseVram(bytes);
}
}  // namespace

GPUPOOL_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  REAL_OR_FAIL(cuMemRelease);
  CUresult r = real(h);
  if (r == CUDA_SUCCESS) UnrefVmm(h);
  return r;
}

GPUPOOL_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                 CUmemGenericAllocationHandle h, unsigned long long flags) {
  REAL_OR_FAIL(cuMemMap);
  CUresult r = real(ptr, size, offset, h, flags);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_vmm.find(h);
  if (it != g_vmm.end()) {
    ++it->second.refs;
    g_maps[ptr] = h;
  }
  return r;
}

GPUPOOL_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  REAL_OR_FAIL(cuMemUnmap);
  CUresult r = real(ptr, size);
  if (r != CUDA_SUCCESS) return r;
  CUmemGenericAllocationHandle h = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_maps.find(ptr);
    if (it == g_maps.end()) return r;
    h = it->second;
    g_maps.erase(it);
  }
  UnrefVmm(h);
  return r;
}

// ---- stream-ordered allocator and pools ------------------------------------------------------

GPUPOOL_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                                CUstream s) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync);
  if (dptr == nullptr || size == 0 || pool == nullptr) return real(dptr, size, pool, s);
  return PoolAlloc(pool, size, [&] { return real(dptr, size, pool, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size,
                                                     CUmemoryPool pool, CUstream s) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync_ptsz);
  if (dptr == nullptr || size == 0 || pool == nullptr) return real(dptr, size, pool, s);
  return PoolAlloc(pool, size, [&] { return real(dptr, size, pool, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream s) {
  REAL_OR_FAIL(cuMemAllocAsync);
  if (dptr == nullptr || size == 0) return real(dptr, size, s);
  CUmemoryPool pool = CurrentPool();
  if (pool == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // cannot tell which pool grows: refuse
  return PoolAlloc(pool, size, [&] { return real(dptr, size, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream s) {
  REAL_OR_FAIL(cuMemAllocAsync_ptsz);
  if (dptr == nullptr || size == 0) return real(dptr, size, s);
  CUmemoryPool pool = CurrentPool();
  if (pool == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return PoolAlloc(pool, size, [&] { return real(dptr, size, s); });
}

GPUPOOL_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  REAL_OR_FAIL(cuMemFreeAsync);
  CUresult r;
  if (FreePlain(
          dptr, [&](CUdeviceptr p) { return real(p, s); }, &r))
    return r;
  return real(dptr, s);  // back to its pool: the charge follows at the next synchronize
}

GPUPOOL_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  REAL_OR_FAIL(cuMemFreeAsync_ptsz);
  CUresult r;
  if (FreePlain(
          dptr, [&](CUdeviceptr p) { return real(p, s); }, &r))
    return r;
  return real(dptr, s);
}

GPUPOOL_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  REAL_OR_FAIL(cuMemPoolTrimTo);
  CUresult r = real(pool, keep);
  gi::ResyncPools();
  return r;
}

GPUPOOL_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  REAL_OR_FAIL(cuMemPoolDestroy);
  std::lock_guard<std::mutex> l(g_pool_mu);
  cuuint64_t used = 0;
  auto get = REAL(cuMemPoolGetAttribute);
  bool known = get != nullptr && get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS;
  CUresult r = real(pool);
  auto it = g_pools.find(pool);
  if (r == CUDA_SUCCESS && it != g_pools.end() && known) {
    // Outstanding allocations keep their memory (and their charge) until the process ends.
    if (it->second > used) gi::ReleaseVram(it->second - used);
    g_pools.erase(it);
  }
  return r;
}

GPUPOOL_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  REAL_OR_FAIL(cuStreamSynchronize);
  CUresult r = real(s);
  gi::ResyncPools();
  return r;
}

GPUPOOL_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  REAL_OR_FAIL(cuStreamSynchronize_ptsz);
  CUresult r = real(s);
  gi::ResyncPools();
  return r;
}

GPUPOOL_EXPORT CUresult cuCtxSynchronize() {
  REAL_OR_FAIL(cuCtxSynchronize);
  CUresult r = real();
  gi::ResyncPools();
  return r;
}

GPUPOOL_EXPORT CUresult cuEventSynchronize(CUevent e) {
  REAL_OR_FAIL(cuEventSynchronize);
  CUresult r = real(e);
  gi::ResyncPools();
  return r;
}

// ---- IPC ------------------------------------------------------------------------------------

// An import maps memory another process allocated; it is charged to this task (its grant bounds
// what it can reach), at the size the driver reports, before the pointer is returned.
GPUPOOL_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  REAL_OR_FAIL(cuIpcOpenMemHandle_v2);
  auto range = REAL(cuMemGetAddressRange_v2);
  auto close = REAL(cuIpcCloseMemHandle);
  if (range == nullptr || close == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult r = real(dptr, h, flags);
  if (r != CUDA_SUCCESS || dptr == nullptr) return r;
  size_t size = 0;
  if (range(nullptr, &size, *dptr) != CUDA_SUCCESS || !gi::ReserveVram(size)) {
    close(*dptr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_ipc[*dptr] = size;
  return r;
}

GPUPOOL_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REAL_OR_FAIL(cuIpcCloseMemHandle);
  CUresult r = real(dptr);
  if (r != CUDA_SUCCESS) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_ipc.find(dptr);
    if (it != g_ipc.end()) {
      bytes = it->second;
      g_ipc.erase(it);
    }
  }
  gi::ReleaseVram(bytes);
  return r;
}

// ---- contexts -------------------------------------------------------------------------------

GPUPOOL_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned flags, CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v2);
  return ContextCreate(pctx, [&] { return real(pctx, flags, dev); });
}

GPUPOOL_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n,
                                       unsigned flags, CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v3);
  return ContextCreate(pctx, [&] { return real(pctx, params, n, flags, dev); });
}

GPUPOOL_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned flags,
                                       CUdevice dev) {
  REAL_OR_FAIL(cuCtxCreate_v4);
  return ContextCreate(pctx, [&] { return real(pctx, params, flags, dev); });
}

GPUPOOL_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  REAL_OR_FAIL(cuCtxDestroy_v2);
  CUresult r = real(ctx);
  if (r != CUDA_SUCCESS) return r;
  gi::ForgetContext(ctx);
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_ctx.find(ctx);
    if (it != g_ctx.end()) {
      bytes = it->second;
      g_ctx.erase(it);
    }
  }
  gi::ReleaseVram(bytes);
  return r;
}

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  REAL_OR_FAIL(cuDevicePrimaryCtxRetain);
  auto state = REAL(cuDevicePrimaryCtxGetState);
  if (state == nullptr || gi::Ledger() == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> pl(g_primary_mu);
  unsigned flags = 0;
  int active = 0;
  CUresult r = state(dev, &flags, &active);
  if (r != CUDA_SUCCESS) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (!g_primary_charged[dev]) bytes = ContextBytes();
  }
  if (bytes != 0 && !gi::ReserveVram(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  r = real(pctx, dev);
  std::lock_guard<std::mutex> l(g_mu);
  if (r == CUDA_SUCCESS && bytes != 0) g_primary_charged[dev] = true;
  if (r == CUDA_SUCCESS && pctx != nullptr) g_primary_ctx[dev] = *pctx;
  if (r != CUDA_SUCCESS) gi::ReleaseVram(bytes);
  return r;
}

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  REAL_OR_FAIL(cuDevicePrimaryCtxRelease_v2);
  std::lock_guard<std::mutex> pl(g_primary_mu);
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS) SyncPrimary(dev);
  return r;
}

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  REAL_OR_FAIL(cuDevicePrimaryCtxReset_v2);
  std::lock_guard<std::mutex> pl(g_primary_mu);
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS) SyncPrimary(dev);
  return r;
}

// ---- graphs ---------------------------------------------------------------------------------

GPUPOOL_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                    unsigned long long flags) {
  REAL_OR_FAIL(cuGraphInstantiateWithFlags);
  return GraphInstantiate(exec, graph, [&] { return real(exec, graph, flags); });
}

GPUPOOL_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  REAL_OR_FAIL(cuGraphInstantiateWithParams);
  return GraphInstantiate(exec, graph, [&] { return real(exec, graph, p); });
}

GPUPOOL_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph,
                                                          CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  REAL_OR_FAIL(cuGraphInstantiateWithParams_ptsz);
  return GraphInstantiate(exec, graph, [&] { return real(exec, graph, p); });
}

GPUPOOL_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  REAL_OR_FAIL(cuGraphExecDestroy);
  CUresult r = real(exec);
  if (r != CUDA_SUCCESS) return r;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_execs.find(exec);
    if (it != g_execs.end()) {
      bytes = it->second;
      g_execs.erase(it);
    }
  }
  gi::ReleaseVram(bytes);
  return r;
}
