// interposer.h — internals shared by the interposer's translation units (libgpupool-cuda.so).
//
// The library is LD_PRELOADed into a task. It exports the driver entry points it hooks under
// their ABI names, plus dlsym and cuGetProcAddress, so a program reaches the hooks however it
// finds the driver. Each hook reserves in the task's ledger before it lets the real driver
// allocate, and gives the reservation back when the driver frees. Without a ledger (socket
// missing or refusing) it fails closed: cuInit and every allocation return an error.
#ifndef GPUPOOL_AGENT_INTERPOSER_INTERPOSER_H_
#define GPUPOOL_AGENT_INTERPOSER_INTERPOSER_H_

#include <cstdint>

#include "agent/interposer/cuda_api.h"
#include "agent/interposer/ledger/ledger_client.h"

namespace gpupool::interposer {

// `name` in the library `handle`, by the real dlsym (not this library's).
void* RealDlsymOf(void* handle, const char* name);

// The real driver's symbol `name` (in libcuda.so.1), nullptr if absent.
void* RealSym(const char* name);

// The ledger connection of this process, connected on first use; nullptr when there is none
// (the caller fails closed).
ledger::LedgerClient* Ledger();

// Reserve `bytes` of VRAM; false when the grant (or the ledger) refuses.
bool ReserveVram(uint64_t bytes);
bool ReserveSpill(uint64_t bytes);
void ReleaseVram(uint64_t bytes);
void ReleaseSpill(uint64_t bytes);

// The hook for a real driver function pointer, or nullptr if it is not hooked.
void* HookFor(const void* real_fn);
// Whether `name` (a base or ABI name) is a known allocating entry point that is not hooked:
// it must not be handed out.
bool Denied(const char* name);
// Whether `name` is the ABI or base name of a hooked entry point.
void* HookByName(const char* name);

// Forgets the compute meter's events of a context the driver has destroyed.
void ForgetContext(CUcontext ctx);

// Resyncs the charge of every stream-ordered pool with what the driver reserves (after a
// synchronize or a trim, when the driver may have released memory).
void ResyncPools();

// Whether stream `s` is being captured into a graph (cuStreamIsCapturing, or its per-thread
// stream variant): work sent to it then runs nothing, and querying its events or the pools'
// state inside the capture is not what the hooks may do.
bool StreamCapturing(CUstream s, bool per_thread);

}  // namespace gpupool::interposer

#define GPUPOOL_EXPORT extern "C" __attribute__((visibility("default")))

// The real entry point `fn` (declared with its hook's type), resolved once.
#define REAL(fn)                                                                                 \
  ([] {                                                                                          \
    static auto real_fn_ = reinterpret_cast<decltype(&fn)>(::gpupool::interposer::RealSym(#fn)); \
    return real_fn_;                                                                             \
  }())

// The real entry point `fn` into `real`, or CUDA_ERROR_NOT_FOUND when the driver lacks it.
#define REAL_OR_FAIL(fn) \
  auto real = REAL(fn);  \
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND

#endif  // GPUPOOL_AGENT_INTERPOSER_INTERPOSER_H_
