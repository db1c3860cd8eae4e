// fake_driver.h — the fake CUDA driver's process-local state and helpers, shared by its
// translation units (fake_core.cc: devices, contexts and the device truth; fake_memory.cc;
// fake_vmm_pools.cc; fake_launch_graphs.cc; fake_entry_points.cc). Not an API: only the
// extern "C" entry points (FAKE_API) are exported from libcuda.so.1.
#ifndef GPUPOOL_TESTS_FAKES_CUDA_FAKE_DRIVER_H_
#define GPUPOOL_TESTS_FAKES_CUDA_FAKE_DRIVER_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/interposer/cuda_api.h"
#include "tests/fakes/cuda/fake_state.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace gpupool::fakecuda::driver {

using ::gpupool::fakecuda::DeviceState;

struct Profile {
  std::string name;
  uint64_t total;
  int sms;
  uint64_t context_bytes;
  int global = 0;   // the device's index in the shared truth (fake_state.h; MIG: kMigBase + k)
  int parent = -1;  // a MIG instance's GPU (its index among the whole GPUs)
};

struct Event {
  uint64_t recorded_ns;         // when cuEventRecord was called
  uint64_t stamp_ns;            // when the device processed it; 0: not yet
  void* captured_in = nullptr;  // the Stream whose capture it was last recorded into
};

// A context. Without MPS a GPU runs one context at a time; an event recorded in a context is
// processed when that context next has the device, so it waits here until the context gets the
// engine for its next kernel (or, if none follows, counts as processed when it was recorded).
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
  // Plain and managed memory on a backed device: the device pages (fake_state.h) holding its
  // bytes, in order. Empty: no contents (copies to or from it are refused).
  std::vector<uint32_t> pages = {};
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

// A stream (cuStreamCreate). While it captures, work sent to it becomes nodes of `capture`
// instead of running; an operation the documentation prohibits during capture invalidates it.
struct Stream {
  Graph* capture = nullptr;
  bool invalidated = false;
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

extern std::mutex g_mu;  // guards every process-local table below
extern bool g_init;
extern std::vector<Profile> g_profiles;
extern std::vector<DeviceState*> g_devs;
extern std::map<CUdeviceptr, Alloc> g_allocs;
extern std::map<CUdeviceptr, uint64_t> g_reserved_va;
extern std::map<CUdeviceptr, CUmemGenericAllocationHandle> g_mappings;
extern std::map<CUmemGenericAllocationHandle, VmmHandle> g_handles;
extern std::map<void*, HostBlock> g_host;
extern std::map<CUarray, std::pair<uint64_t, int>> g_arrays;
extern std::vector<Pool*> g_pools;
extern std::vector<Pool*> g_default_pool;
extern std::vector<Pool*>
    g_current_pool;  // cuDeviceSetMemPool's; cuMemAllocAsync allocates from it
extern std::vector<Ctx*> g_primary;
extern std::vector<int> g_primary_refs;
extern std::vector<uint64_t> g_graph_mem;
extern CUmemGenericAllocationHandle g_next_handle;
extern CUdeviceptr g_next_va;
extern thread_local CUcontext t_ctx;
extern std::vector<uint8_t*> g_vram;  // each backed device's memory, mapped; nullptr: not backed

inline constexpr uint64_t kGranularity = 2ull << 20;
// How long the resident context keeps the device for its next work when it runs none: after
// its kernel ends, or after it queues an event (the host queuing the next kernel meanwhile).
inline constexpr uint64_t kQueuedWorkNs = 200'000;

uint64_t EnvU64(const char* name, uint64_t def);
uint64_t NowNs();
void ParseProfiles();
// fake_mps.cc: at cuInit, become a client of a running MPS daemon's server (or wait for it).
void JoinMpsServer();
// Device memory, charged to (or released from) this process in the shared truth.
CUresult Charge(int dev, uint64_t bytes);
void Uncharge(int dev, uint64_t bytes);
// REQUIRES: g_mu. Fresh device virtual addresses, unique within the process.
CUdeviceptr NewVa(uint64_t size, uint64_t align = 512);
int CurrentDev();  // of the calling thread's current context; -1 without one
// REQUIRES: g_mu. Gives pool memory above the release threshold back (on synchronize).
void ReleasePoolsLocked();
// REQUIRES: g_mu. While a stream captures, a context synchronize is prohibited: it invalidates
// every capture and is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (fake_launch_graphs.cc).
CUresult CaptureProhibitsContextSyncLocked();
// REQUIRES: g_mu. The graph `s` is capturing into, or null.
Graph* CaptureOfLocked(CUstream s);
uint64_t FormatBytes(int format);
// fake_engine.cc: runs one kernel of the current context on its device, in turn with other
// contexts (time-sliced, preemptible); returns when it has had its whole duration on the device.
void RunKernel(CUfunction f);
// fake_engine.cc: whether the current context has the device and runs no kernel now (an event it
// records is then processed at once).
bool ResidentNow();
CUresult AllocPlain(CUdeviceptr* dptr, uint64_t size, Kind kind);
// The device pages of a new allocation of `size` bytes on `dev` (empty when the device is not
// backed or has too few free pages), and their release.
std::vector<uint32_t> TakePages(int dev, uint64_t size);
void GivePages(int dev, const std::vector<uint32_t>& pages);
CUresult AllocPool(CUdeviceptr* dptr, size_t size, CUmemoryPool hpool);
CUresult CtxCreate(CUcontext* pctx, CUdevice dev, bool primary);
void CtxFree(CUcontext ctx);

}  // namespace gpupool::fakecuda::driver

#define REQUIRE_INIT() \
  if (!::gpupool::fakecuda::driver::g_init) return CUDA_ERROR_NOT_INITIALIZED
#define REQUIRE_CTX() \
  REQUIRE_INIT();     \
  if (::gpupool::fakecuda::driver::CurrentDev() < 0) return CUDA_ERROR_INVALID_CONTEXT

#endif  // GPUPOOL_TESTS_FAKES_CUDA_FAKE_DRIVER_H_
