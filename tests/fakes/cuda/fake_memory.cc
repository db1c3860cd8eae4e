// The fake driver: plain, pitch, managed and array memory, pinned host memory, IPC.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

// ---- memory ---------------------------------------------------------------------------------

FAKE_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  REQUIRE_CTX();
  if (free_bytes == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  DeviceState* s = g_devs[CurrentDev()];
  gpupool::fakecuda::Lock(&s->mu);
  gpupool::fakecuda::ReapLocked(s);
  *total = s->total;
  *free_bytes = s->total - s->used;
  pthread_mutex_unlock(&s->mu);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t size) {
  REQUIRE_CTX();
  return AllocPlain(dptr, size, Kind::kPlain);
}

FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                     unsigned elem) {
  REQUIRE_CTX();
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + 511) / 512 * 512;  // rows aligned to the texture pitch alignment
  if (height > UINT64_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = AllocPlain(dptr, p * height, Kind::kPlain);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  return AllocPlain(dptr, size, Kind::kManaged);
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REQUIRE_INIT();
  if (dptr == 0) return CUDA_SUCCESS;
  Alloc a;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_allocs.find(dptr);
    if (it == g_allocs.end() || it->second.kind == Kind::kIpc || it->second.kind == Kind::kGraph)
      return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    g_allocs.erase(it);
    if (a.kind == Kind::kPool) {  // freeing pool memory synchronously returns it to the pool
      reinterpret_cast<Pool*>(a.pool)->used -= a.size;
      return CUDA_SUCCESS;
    }
  }
  GivePages(a.dev, a.pages);
  Uncharge(a.dev, a.size);
  return CUDA_SUCCESS;
}

// ---- copies and sets ------------------------------------------------------------------------
// Synchronous, like every stream of this fake. Only plain and managed memory of a backed device
// has contents (fake_state.h); anything else is CUDA_ERROR_NOT_SUPPORTED, so a test that needs
// bytes never passes on memory that holds none.

namespace {

// Calls run(bytes, n, done) over the device bytes of [dptr, dptr + n), page by page.
// Mapped pinned host memory is addressable by the device too: with unified addressing its device
// pointer is its host address and any entry point that takes a device pointer accepts it
// (CUDA Driver API, "Unified Addressing": https://docs.nvidia.com/cuda/cuda-driver-api/
// group__CUDA__UNIFIED.html). That is how a spilled allocation is written and read.
template <typename Run>
CUresult OverDeviceBytes(CUdeviceptr dptr, size_t n, Run run) {
  std::lock_guard<std::mutex> l(g_mu);
  auto host = g_host.upper_bound(reinterpret_cast<void*>(dptr));
  if (host != g_host.begin()) {
    --host;
    const uint64_t off = dptr - reinterpret_cast<CUdeviceptr>(host->first);
    if (off < host->second.size && (host->second.flags & CU_MEMHOSTALLOC_DEVICEMAP) != 0) {
      if (n > host->second.size - off) return CUDA_ERROR_INVALID_VALUE;
      run(static_cast<uint8_t*>(host->first) + off, n, 0);
      return CUDA_SUCCESS;
    }
  }
  auto it = g_allocs.upper_bound(dptr);
  if (it == g_allocs.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  const Alloc& a = it->second;
  const uint64_t off = dptr - it->first;
  if (off >= a.size || n > a.size - off) return CUDA_ERROR_INVALID_VALUE;
  if (a.pages.empty() || g_vram[a.dev] == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  constexpr uint64_t kPage = gpupool::fakecuda::kPageBytes;
  for (size_t done = 0; done < n;) {
    const uint64_t at = off + done;
    const size_t chunk = std::min<uint64_t>(n - done, kPage - at % kPage);
    run(g_vram[a.dev] + uint64_t(a.pages[at / kPage]) * kPage + at % kPage, chunk, done);
    done += chunk;
  }
  return CUDA_SUCCESS;
}

}  // namespace

FAKE_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) {
  REQUIRE_CTX();
  return OverDeviceBytes(dst, n,
                         [&](uint8_t* p, size_t len, size_t) { std::memset(p, value, len); });
}

FAKE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  REQUIRE_CTX();
  if (src == nullptr && n != 0) return CUDA_ERROR_INVALID_VALUE;
  const auto* from = static_cast<const uint8_t*>(src);
  return OverDeviceBytes(
      dst, n, [&](uint8_t* p, size_t len, size_t done) { std::memcpy(p, from + done, len); });
}

FAKE_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  REQUIRE_CTX();
  if (dst == nullptr && n != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* to = static_cast<uint8_t*>(dst);
  return OverDeviceBytes(
      src, n, [&](uint8_t* p, size_t len, size_t done) { std::memcpy(to + done, p, len); });
}

// CUuuid: 16 bytes (cuda.h's CUuuid_st). The fake's UUIDs: fake_state.h, FakeUuid.
struct FakeCuUuid {
  unsigned char bytes[16];
};

// For a MIG instance, cuDeviceGetUuid names its GPU and cuDeviceGetUuid_v2 (CUDA 11.4) the
// instance itself (CUDA Driver API, "Device Management": "returns the MIG UUID" for v2).
FAKE_API CUresult cuDeviceGetUuid_v2(FakeCuUuid* uuid, CUdevice d) {
  REQUIRE_INIT();
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  gpupool::fakecuda::FakeUuidBytes(g_profiles[static_cast<size_t>(d)].global, uuid->bytes);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetUuid(FakeCuUuid* uuid, CUdevice d) {
  CUresult r = cuDeviceGetUuid_v2(uuid, d);
  if (r != CUDA_SUCCESS) return r;
  const Profile& p = g_profiles[static_cast<size_t>(d)];
  if (p.parent >= 0) gpupool::fakecuda::FakeUuidBytes(p.parent, uuid->bytes);
  return r;
}

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr dptr) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.upper_bound(dptr);
  if (it == g_allocs.begin()) return CUDA_ERROR_NOT_FOUND;
  --it;
  if (dptr >= it->first + it->second.size) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = it->first;
  if (size != nullptr) *size = it->second.size;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuArrayCreate_v2(CUarray* arr, const CUDA_ARRAY_DESCRIPTOR* d) {
  REQUIRE_CTX();
  if (arr == nullptr || d == nullptr || d->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t eb = FormatBytes(d->Format);
  if (eb == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t h = d->Height == 0 ? 1 : d->Height;
  uint64_t row = eb * d->NumChannels * d->Width;
  if (d->Width > (1ull << 40) || h > UINT64_MAX / row) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t bytes = row * h;
  int dev = CurrentDev();
  CUresult r = Charge(dev, bytes);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> l(g_mu);
  *arr = reinterpret_cast<CUarray>(new char(0));
  g_arrays[*arr] = {bytes, dev};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuArray3DCreate_v2(CUarray* arr, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  REQUIRE_CTX();
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR flat{d->Width,
                             (d->Height == 0 ? 1 : d->Height) * (d->Depth == 0 ? 1 : d->Depth),
                             d->Format, d->NumChannels};
  return cuArrayCreate_v2(arr, &flat);
}

FAKE_API CUresult cuArrayDestroy(CUarray arr) {
  REQUIRE_INIT();
  std::pair<uint64_t, int> a;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_arrays.find(arr);
    if (it == g_arrays.end()) return CUDA_ERROR_INVALID_HANDLE;
    a = it->second;
    g_arrays.erase(it);
  }
  delete reinterpret_cast<char*>(arr);
  Uncharge(a.second, a.first);
  return CUDA_SUCCESS;
}

// ---- host memory (pinned, mapped) -----------------------------------------------------------

FAKE_API CUresult cuMemHostAlloc(void** pp, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (pp == nullptr || size == 0 || flags > 7) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> l(g_mu);
  g_host[p] = HostBlock{size, flags, false};
  *pp = p;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFreeHost(void* p) {
  REQUIRE_INIT();
  HostBlock b;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = g_host.find(p);
    if (it == g_host.end() || it->second.registered) return CUDA_ERROR_INVALID_VALUE;
    b = it->second;
    g_host.erase(it);
  }
  munmap(p, b.size);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned flags) {
  REQUIRE_CTX();
  if (p == nullptr || size == 0 || flags > 15) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_host.count(p) != 0) return CUDA_ERROR_INVALID_VALUE;  // HOST_MEMORY_ALREADY_REGISTERED
  g_host[p] = HostBlock{size, flags, true};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostUnregister(void* p) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_host.find(p);
  if (it == g_host.end() || !it->second.registered) return CUDA_ERROR_INVALID_VALUE;
  g_host.erase(it);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned flags) {
  REQUIRE_CTX();
  if (dptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_host.upper_bound(p);
  if (it == g_host.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  auto off = static_cast<uint64_t>(static_cast<char*>(p) - static_cast<char*>(it->first));
  if (off >= it->second.size || (it->second.flags & CU_MEMHOSTALLOC_DEVICEMAP) == 0)
    return CUDA_ERROR_INVALID_VALUE;
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the host address
  return CUDA_SUCCESS;
}

// ---- IPC ----------------------------------------------------------------------------------

FAKE_API CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr dptr) {
  REQUIRE_INIT();
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || it->second.kind != Kind::kPlain) return CUDA_ERROR_INVALID_VALUE;
  IpcWire w{kIpcMagic, getpid(),       it->second.dev, gpupool::fakecuda::ProcStartTime(getpid()),
            dptr,      it->second.size};
  std::memset(h, 0, sizeof *h);
  std::memcpy(h->reserved, &w, sizeof w);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags);
// The v1 ABI (CUDA 4.1), the same arguments.
FAKE_API CUresult cuIpcOpenMemHandle(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  return cuIpcOpenMemHandle_v2(dptr, h, flags);
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* dptr, CUipcMemHandle h, unsigned flags) {
  REQUIRE_CTX();
  if (dptr == nullptr || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  IpcWire w;
  std::memcpy(&w, h.reserved, sizeof w);
  if (w.magic != kIpcMagic) return CUDA_ERROR_INVALID_VALUE;
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;  // not openable by its exporter
  if (gpupool::fakecuda::ProcStartTime(w.pid) != w.start_time) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  *dptr = NewVa(w.size);  // the exporter's memory, mapped: no new device memory
  g_allocs[*dptr] = Alloc{w.size, w.dev, Kind::kIpc, nullptr};
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || it->second.kind != Kind::kIpc) return CUDA_ERROR_INVALID_VALUE;
  g_allocs.erase(it);
  return CUDA_SUCCESS;
}
