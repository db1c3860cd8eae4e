// Device memory hooks for the stream-ordered allocator (pools, their thresholds and trims, the
// synchronizes that release pool memory) and graph memory nodes. The invariant of
// hooks_memory.cc holds; neither ever spills.
#include <map>
#include <mutex>
#include <vector>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

std::mutex g_pool_mu;                      // guards g_pools; held across a pool allocation
std::map<CUmemoryPool, uint64_t> g_pools;  // what each pool is charged
std::mutex g_mu;                           // guards g_execs
std::map<CUgraphExec, uint64_t> g_execs;

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

// A stream-ordered allocation into a capturing stream (gi::StreamCapturing) allocates nothing
// now: it becomes a memory-allocation node of the graph (CUDA C++ Programming Guide, "Graph
// Memory Nodes": "stream-ordered allocation APIs called during stream capture create memory
// allocation nodes"), which instantiation charges (GraphInstantiate below). So the allocation
// passes through without the ledger or the pool queries, which must not run inside a capture.

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

}  // namespace

bool gi::StreamCapturing(CUstream s, bool per_thread) {
  auto is = per_thread ? REAL(cuStreamIsCapturing_ptsz) : REAL(cuStreamIsCapturing);
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return is != nullptr && is(s, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

void gi::ResyncPools() {
  std::lock_guard<std::mutex> l(g_pool_mu);
  for (auto& [pool, charged] : g_pools) ResyncLocked(pool, &charged);
}

// ---- stream-ordered allocator and pools ------------------------------------------------------

GPUPOOL_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                                CUstream s) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync);
  if (dptr == nullptr || size == 0 || pool == nullptr || gi::StreamCapturing(s, false))
    return real(dptr, size, pool, s);
  return PoolAlloc(pool, size, [&] { return real(dptr, size, pool, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size,
                                                     CUmemoryPool pool, CUstream s) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync_ptsz);
  if (dptr == nullptr || size == 0 || pool == nullptr || gi::StreamCapturing(s, true))
    return real(dptr, size, pool, s);
  return PoolAlloc(pool, size, [&] { return real(dptr, size, pool, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream s) {
  REAL_OR_FAIL(cuMemAllocAsync);
  if (dptr == nullptr || size == 0 || gi::StreamCapturing(s, false)) return real(dptr, size, s);
  CUmemoryPool pool = CurrentPool();
  if (pool == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // cannot tell which pool grows: refuse
  return PoolAlloc(pool, size, [&] { return real(dptr, size, s); });
}

GPUPOOL_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream s) {
  REAL_OR_FAIL(cuMemAllocAsync_ptsz);
  if (dptr == nullptr || size == 0 || gi::StreamCapturing(s, true)) return real(dptr, size, s);
  CUmemoryPool pool = CurrentPool();
  if (pool == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return PoolAlloc(pool, size, [&] { return real(dptr, size, s); });
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

// CUDA 13's runtime resolves "cuCtxSynchronize" to this variant (seen on driver 580).
GPUPOOL_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  REAL_OR_FAIL(cuCtxSynchronize_v2);
  CUresult r = real(ctx);
  gi::ResyncPools();
  return r;
}

GPUPOOL_EXPORT CUresult cuEventSynchronize(CUevent e) {
  REAL_OR_FAIL(cuEventSynchronize);
  CUresult r = real(e);
  gi::ResyncPools();
  return r;
}

// ---- graphs ---------------------------------------------------------------------------------

GPUPOOL_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                    unsigned long long flags) {
  REAL_OR_FAIL(cuGraphInstantiateWithFlags);
  return GraphInstantiate(exec, graph, [&] { return real(exec, graph, flags); });
}

// The CUDA 10 and 11 ABIs of "cuGraphInstantiate", still exported and asked for by name.
GPUPOOL_EXPORT CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph,
                                           CUgraphNode* error_node, char* log, size_t log_size) {
  REAL_OR_FAIL(cuGraphInstantiate);
  return GraphInstantiate(exec, graph,
                          [&] { return real(exec, graph, error_node, log, log_size); });
}

GPUPOOL_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph,
                                              CUgraphNode* error_node, char* log, size_t log_size) {
  REAL_OR_FAIL(cuGraphInstantiate_v2);
  return GraphInstantiate(exec, graph,
                          [&] { return real(exec, graph, error_node, log, log_size); });
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
