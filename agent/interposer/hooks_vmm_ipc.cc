// Device memory hooks for virtual memory management (cuMemCreate/Map/Unmap/Release) and IPC
// imports. The invariant of hooks_memory.cc holds; neither ever spills.
#include <map>
#include <mutex>
#include <vector>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

struct VmmHandle {
  uint64_t bytes;
  int refs;  // the handle plus one per mapping, as the driver counts them
};

std::mutex g_mu;  // guards the tables below
std::map<CUmemGenericAllocationHandle, VmmHandle> g_vmm;
std::map<CUdeviceptr, CUmemGenericAllocationHandle> g_maps;
std::map<CUdeviceptr, uint64_t> g_ipc;

}  // namespace

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

// ---- IPC ------------------------------------------------------------------------------------

// An import maps memory another process allocated; it is charged to this task (its grant bounds
// what it can reach), at the size the driver reports, before the pointer is returned.
namespace {
// An import maps memory another process allocated; it is charged here too, for its size.
template <typename Open>
CUresult IpcOpen(Open real, CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
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
}  // namespace

GPUPOOL_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  REAL_OR_FAIL(cuIpcOpenMemHandle_v2);
  return IpcOpen(real, dptr, h, flags);
}

// The v1 ABI (same arguments), which the CUDA runtime asks for by name.
GPUPOOL_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  REAL_OR_FAIL(cuIpcOpenMemHandle);
  return IpcOpen(real, dptr, h, flags);
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
