// The fake driver: virtual memory management and the stream-ordered allocator's pools.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

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

// Stream-ordered allocation into a stream being captured, as the CUDA C++ Programming Guide
// ("Graph Memory Nodes") describes it: it allocates nothing now and takes nothing from the pool;
// it adds a memory-allocation node to the graph, whose address is fixed at once and whose memory
// exists from instantiation (cuGraphInstantiate charges it). A free in the capture adds a
// memory-free node. True when `s` is capturing (and the node was added).
namespace {
bool CapturedAllocLocked(CUstream s, CUdeviceptr* dptr, size_t size) {
  Graph* g = CaptureOfLocked(s);
  if (g == nullptr) return false;
  *dptr = NewVa(size);
  g->nodes.push_back(new Node{Node::kAlloc, nullptr, size, *dptr});
  return true;
}
}  // namespace

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                          CUstream s) {
  REQUIRE_CTX();
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (dptr != nullptr && size != 0 && pool != nullptr && CapturedAllocLocked(s, dptr, size))
      return CUDA_SUCCESS;
  }
  return AllocPool(dptr, size, pool);
}
FAKE_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                               CUstream s) {
  return cuMemAllocFromPoolAsync(dptr, size, pool, s);
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream s) {
  REQUIRE_CTX();
  CUmemoryPool pool;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (dptr != nullptr && size != 0 && CapturedAllocLocked(s, dptr, size)) return CUDA_SUCCESS;
    pool = reinterpret_cast<CUmemoryPool>(g_current_pool[CurrentDev()]);
  }
  return AllocPool(dptr, size, pool);
}
FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream s) {
  return cuMemAllocAsync(dptr, size, s);
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  if (Graph* g = CaptureOfLocked(s)) {  // a memory-free node; nothing is freed now
    g->nodes.push_back(new Node{Node::kFree, nullptr, 0, dptr});
    return CUDA_SUCCESS;
  }
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
