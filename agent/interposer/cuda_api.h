// cuda_api.h — prototypes of the CUDA driver entry points gpupool calls or hooks, by ABI name,
// as the CUDA Driver API reference documents them (https://docs.nvidia.com/cuda/cuda-driver-api/,
// the pages listed in cuda_abi.h). The interposer uses them only for their types (REAL());
// programs in tests link them from the (fake) libcuda.so.1.
#ifndef GPUPOOL_AGENT_INTERPOSER_CUDA_API_H_
#define GPUPOOL_AGENT_INTERPOSER_CUDA_API_H_

#include "agent/interposer/cuda_abi.h"

extern "C" {
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int* version);
CUresult cuDeviceGetCount(int* count);
CUresult cuDeviceGet(CUdevice* dev, int ordinal);
CUresult cuDeviceGetName(char* name, int len, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev);
CUresult cuDeviceGetAttribute(int* value, int attrib, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext* ctx, CUexecAffinityParam* params, int n, unsigned flags,
                        CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams* params, unsigned flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext* ctx);
CUresult cuCtxGetDevice(CUdevice* dev);
CUresult cuCtxSynchronize();
CUresult cuCtxSynchronize_v2(CUcontext ctx);  // CUDA 13.0: the named context (NULL: current)
CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);  // v1 (CUDA 7.0–10.x ABI, still exported)
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);  // v1
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned* flags, int* active);
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total);
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t size);
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned elem);
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned flags);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr);
CUresult cuArrayCreate_v2(CUarray* arr, const CUDA_ARRAY_DESCRIPTOR* desc);
CUresult cuArrayDestroy(CUarray arr);
CUresult cuArray3DCreate_v2(CUarray* arr, const CUDA_ARRAY3D_DESCRIPTOR* desc);
CUresult cuMemHostAlloc(void** pp, size_t size, unsigned flags);
CUresult cuMemFreeHost(void* p);
CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned flags);
CUresult cuMemHostUnregister(void* p);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned flags);
CUresult cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp* prop, int option);
CUresult cuMemCreate(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle h);
CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count);
CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props);
CUresult cuMemPoolDestroy(CUmemoryPool pool);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev);
CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev);
CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void* value);
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void* value);
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t size, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t size, CUmemoryPool pool,
                                      CUstream s);
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t size, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t size, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr dptr);
CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags);  // v1
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags);
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
CUresult cuStreamCreate(CUstream* s, unsigned flags);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuStreamQuery(CUstream s);
CUresult cuEventCreate(CUevent* e, unsigned flags);
CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventRecord_ptsz(CUevent e, CUstream s);
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status);
CUresult cuStreamBeginCapture_v2(CUstream s, int mode);  // mode 0: CU_STREAM_CAPTURE_MODE_GLOBAL
CUresult cuStreamEndCapture(CUstream s, CUgraph* graph);
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status);
CUresult cuEventSynchronize(CUevent e);
CUresult cuEventQuery(CUevent e);
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end);
CUresult cuEventDestroy_v2(CUevent e);
CUresult cuModuleLoadData(CUmodule* m, const void* image);
CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream s, void** params,
                        void** extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared, CUstream s, void** params,
                             void** extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra);
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shared, CUstream s,
                                   void** params);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                        CUstream s, void** params);
CUresult cuGraphCreate(CUgraph* g, unsigned flags);
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                 const CUDA_KERNEL_NODE_PARAMS* params);
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                                CUDA_MEM_ALLOC_NODE_PARAMS* params);
CUresult cuGraphAddMemFreeNode(CUgraphNode* node, CUgraph g, const CUgraphNode* deps, size_t n,
                               CUdeviceptr dptr);
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count);
CUresult cuGraphNodeGetType(CUgraphNode node, int* type);
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out);
// The CUDA 10/11 ABIs of "cuGraphInstantiate" (an error node and a log buffer).
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph g, CUgraphNode* error_node, char* log,
                            size_t log_size);
CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph g, CUgraphNode* error_node, char* log,
                               size_t log_size);
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long flags);
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph g,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* params);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph g,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params);
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s);
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s);
CUresult cuGraphExecDestroy(CUgraphExec exec);
CUresult cuDeviceGraphMemTrim(CUdevice dev);
CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, int attr, void* value);
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);
}

#endif  // GPUPOOL_AGENT_INTERPOSER_CUDA_API_H_
