// Device memory hooks for plain allocations: cuMemAlloc, pitch, managed, arrays, their frees,
// spill, and cuMemGetInfo.
//
// Invariant (every hooks_*.cc file keeps it for its paths): the ledger holds at least what the
// driver has allocated for this process at any instant — the charge rises before the driver's
// figure and falls after it. Plain allocations may spill to mapped pinned host memory when the
// grant has spill; nothing else spills.
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
std::mutex g_mu;  // guards the tables below
std::map<CUdeviceptr, Plain> g_plain;
std::map<CUarray, uint64_t> g_arrays;

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

}  // namespace

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
