// The fake driver: cuGetProcAddress and its table of entry points.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

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
    EV(cuCtxSynchronize, cuCtxSynchronize_v2, 13000),  // a second ABI under one name
    E(cuDevicePrimaryCtxRetain, 7000),
    E(cuDevicePrimaryCtxRelease, 7000),
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
    E(cuIpcOpenMemHandle, 4010),
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
    E(cuGraphInstantiate, 10000),
    EV(cuGraphInstantiate, cuGraphInstantiate_v2, 11000),
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
namespace {
// With GPUPOOL_FAKE_CUDA_PROC_THUNKS=1, cuGetProcAddress hands out a pointer of its own for
// cuMemAlloc instead of the exported symbol's address, as a driver may (nothing documents that
// the two are the same). The interposer cannot recognise it and must refuse it.
CUresult ThunkMemAlloc(CUdeviceptr* dptr, size_t size) { return cuMemAlloc_v2(dptr, size); }
}  // namespace

FAKE_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr || flags > 2) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  // The newest variant the caller's version knows: a name may carry several ABIs over time
  // (cuCtxSynchronize: () until 12.x, (CUcontext) from 13.0).
  const Entry* found = nullptr;
  bool named = false;
  for (const Entry& e : kEntries) {
    if (strcmp(e.name, symbol) != 0) continue;
    named = true;
    if (e.since <= version && (found == nullptr || e.since > found->since)) found = &e;
  }
  if (named && found == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (found != nullptr) {
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 && found->ptds != nullptr
               ? found->ptds
               : found->fn;
    if (found->fn == reinterpret_cast<void*>(&cuMemAlloc_v2) &&
        EnvU64("GPUPOOL_FAKE_CUDA_PROC_THUNKS", 0) != 0)
      *pfn = reinterpret_cast<void*>(&ThunkMemAlloc);
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
