// Context hooks: each context is charged the ledger's context_bytes before it exists (what the
// driver allocates for it on the device), released after it is destroyed.
#include <map>
#include <mutex>
#include <vector>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

std::mutex g_mu;  // guards the tables below
std::map<CUcontext, uint64_t> g_ctx;
std::map<int, bool> g_primary_charged;
std::map<int, CUcontext> g_primary_ctx;
std::mutex g_primary_mu;  // serialises primary context retain/release

uint64_t ContextBytes() {
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  return l != nullptr ? l->hello().context_bytes : 0;
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

namespace {
// A release or reset of a device's primary context, whichever ABI: the charge follows the
// context's state as the driver reports it after the call (SyncPrimary).
template <typename Fn>
CUresult PrimaryCall(Fn real, CUdevice dev) {
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  std::lock_guard<std::mutex> pl(g_primary_mu);
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS) SyncPrimary(dev);
  return r;
}
}  // namespace

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return PrimaryCall(REAL(cuDevicePrimaryCtxRelease_v2), dev);
}

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return PrimaryCall(REAL(cuDevicePrimaryCtxReset_v2), dev);
}

// The v1 ABIs, which CUDA 13's runtime and libraries still ask for by name (seen on driver
// 580: refused, cuBLAS could not start): the same accounting, whatever the variant's semantics.
GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return PrimaryCall(REAL(cuDevicePrimaryCtxRelease), dev);
}

GPUPOOL_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return PrimaryCall(REAL(cuDevicePrimaryCtxReset), dev);
}
