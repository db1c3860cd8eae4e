// cuda_abi.h — the slice of NVIDIA's CUDA driver API that the interposer and the fake driver use,
// declared from the documentation (no CUDA headers are needed to build either). Types, enum
// values and signatures follow the CUDA Driver API reference:
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html          (types, enums)
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html            (cuMemAlloc…)
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html             (VMM)
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html  (async/pools)
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEMPOOL.html
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html
//   https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DRIVER__ENTRY__POINT.html
// Only what is used is declared. Every type is laid out as the documented struct, so a pointer
// to one may be handed to NVIDIA's libcuda.so.1 unchanged. Exported symbol names are the ABI
// names (cuMemAlloc_v2, …): the unsuffixed names in NVIDIA's cuda.h are macros over them.
#ifndef GPUPOOL_AGENT_INTERPOSER_CUDA_ABI_H_
#define GPUPOOL_AGENT_INTERPOSER_CUDA_ABI_H_

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int CUresult;  // enum cudaError_enum; the values used are below.
enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_UNKNOWN = 999,
};

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2: 64-bit on every 64-bit platform.
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef enum CUstreamCaptureStatus_enum {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;
typedef struct CUevent_st* CUevent;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUarray_st* CUarray;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;

// CUdevice_attribute (values from the documented enum).
enum : int { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16 };

// cuMemHostAlloc flags.
enum : unsigned { CU_MEMHOSTALLOC_PORTABLE = 1, CU_MEMHOSTALLOC_DEVICEMAP = 2 };
// cuMemAllocManaged flags (CUmemAttach_flags).
enum : unsigned { CU_MEM_ATTACH_GLOBAL = 1, CU_MEM_ATTACH_HOST = 2 };

// CUarray_format (subset) and the 2D descriptor.
enum : int {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
};
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  int Format;  // CUarray_format
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;  // CUarray_format
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

// Virtual memory management.
enum : int { CU_MEM_ALLOCATION_TYPE_PINNED = 1 };
enum : int { CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum : int { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1 };
typedef struct CUmemLocation_st {
  int type;  // CUmemLocationType
  int id;
} CUmemLocation;
typedef struct CUmemAllocationProp_st {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
} CUmemAccessDesc;

// Stream-ordered allocator and pools.
typedef struct CUmemPoolProps_st {
  int allocType;    // CUmemAllocationType
  int handleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;  // CUDA 12.2+; was part of reserved before, 0 means the default.
  unsigned short usage;
  unsigned char reserved[54];
} CUmemPoolProps;
enum : int {  // CUmemPool_attribute
  CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
  CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
  CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
  CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
  CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
};

// IPC.
typedef struct CUipcMemHandle_st {
  char reserved[64];
} CUipcMemHandle;

// Launches.
typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

// Graphs.
// CUDA_KERNEL_NODE_PARAMS_v2, what cuGraphAddKernelNode_v2 reads: the v1 fields, then a kernel
// and a context (both NULL when `func` is given). With a v1-sized struct the driver would read
// `kern` and `ctx` past its end.
typedef struct CUDA_KERNEL_NODE_PARAMS_st {
  CUfunction func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  void* kern;  // CUkernel
  CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {  // CUDA_MEM_ALLOC_NODE_PARAMS_v1
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;  // out
} CUDA_MEM_ALLOC_NODE_PARAMS;
enum : int {  // CUgraphMem_attribute
  CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
  CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
};

enum : int {  // CUgraphNodeType (subset)
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_EMPTY = 5,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
};
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  int result_out;  // CUgraphInstantiateResult
} CUDA_GRAPH_INSTANTIATE_PARAMS;
typedef struct CUexecAffinityParam_st CUexecAffinityParam;
typedef struct CUctxCreateParams_st CUctxCreateParams;

// cuGetProcAddress flags and the _v2 query result.
enum : unsigned long long {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
};
typedef enum CUdriverProcAddressQueryResult_enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

}  // extern "C"

// The documented layouts, checked (x86-64 / aarch64 LP64).
static_assert(sizeof(CUmemAllocationProp) == 32);
static_assert(sizeof(CUmemPoolProps) == 88);
static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120);
static_assert(sizeof(CUipcMemHandle) == 64);
static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24);
static_assert(sizeof(CUlaunchConfig) == 56);
static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32);

#endif  // GPUPOOL_AGENT_INTERPOSER_CUDA_ABI_H_
