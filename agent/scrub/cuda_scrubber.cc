// The CUDA driver API through dlopen: only the handful of entry points a scrub needs, declared
// here with the driver's C ABI (no CUDA headers at build time).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "agent/scrub/scrubber.h"

namespace gpupool::agent {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
struct CUuuid {
  unsigned char bytes[16];
};
constexpr CUresult kSuccess = 0;
constexpr CUresult kOutOfMemory = 2;
constexpr int64_t kMinChunk = 2ll << 20;
constexpr int64_t kMaxChunk = 1ll << 30;
constexpr size_t kVerifyPiece = 16u << 20;

struct Driver {
  void* lib = nullptr;
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*CtxCreate)(CUcontext*, unsigned, CUdevice) = nullptr;
  CUresult (*CtxDestroy)(CUcontext) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*MemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
};

template <typename F>
bool Load(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// "GPU-8c0a2f6e-1b2c-..." → the 16 bytes cuDeviceGetUuid returns.
bool ParseUuid(const std::string& uuid, CUuuid* out) {
  if (uuid.rfind("GPU-", 0) != 0) return false;
  std::string hex;
  for (char c : uuid.substr(4)) {
    if (c != '-') hex += c;
  }
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    out->bytes[i] = static_cast<unsigned char>(std::stoi(hex.substr(i * 2, 2), nullptr, 16));
  }
  return true;
}

class CudaScrubber final : public VramScrubber {
 public:
  explicit CudaScrubber(Driver d) : d_(d) {}
  ~CudaScrubber() override { dlclose(d_.lib); }
  std::string Name() const override { return "cuda"; }
  bool CanScrub(const std::string& uuid) const override { return uuid.rfind("GPU-", 0) == 0; }

  Result<ScrubResult> Scrub(const std::string& uuid) override {
    const auto start = std::chrono::steady_clock::now();
    auto fail = [&](const char* call, CUresult rc) {
      return Status::Internal("vram scrub of " + uuid + ": " + call + " failed (CUresult " +
                              std::to_string(rc) + ")");
    };
    CUuuid want{};
    if (!ParseUuid(uuid, &want)) {
      return Status::InvalidArgument("vram scrub: '" + uuid + "' is not a GPU UUID");
    }
    if (CUresult rc = d_.Init(0); rc != kSuccess) return fail("cuInit", rc);
    int count = 0;
    if (CUresult rc = d_.DeviceGetCount(&count); rc != kSuccess)
      return fail("cuDeviceGetCount", rc);
    CUdevice dev = -1;
    for (int i = 0; i < count && dev < 0; ++i) {
      CUdevice d = 0;
      CUuuid u{};
      if (d_.DeviceGet(&d, i) == kSuccess && d_.DeviceGetUuid(&u, d) == kSuccess &&
          std::memcmp(u.bytes, want.bytes, 16) == 0) {
        dev = d;
      }
    }
    if (dev < 0) return Status::NotFound("vram scrub: no CUDA device with UUID " + uuid);
    CUcontext ctx = nullptr;
    if (CUresult rc = d_.CtxCreate(&ctx, 0, dev); rc != kSuccess) return fail("cuCtxCreate", rc);
    std::vector<std::pair<CUdeviceptr, size_t>> chunks;
    Status st;
    int64_t bytes = 0;
    // Take every free byte, in chunks as large as the allocator grants.
    size_t free_b = 0, total_b = 0;
    if (CUresult rc = d_.MemGetInfo(&free_b, &total_b); rc != kSuccess)
      st = fail("cuMemGetInfo", rc);
    int64_t chunk = kMaxChunk;
    while (st.ok() && chunk >= kMinChunk) {
      CUdeviceptr p = 0;
      const CUresult rc = d_.MemAlloc(&p, static_cast<size_t>(chunk));
      if (rc == kOutOfMemory) {
        chunk /= 2;
        continue;
      }
      if (rc != kSuccess) {
        st = fail("cuMemAlloc", rc);
        break;
      }
      chunks.emplace_back(p, static_cast<size_t>(chunk));
      if (CUresult m = d_.MemsetD8(p, 0, static_cast<size_t>(chunk)); m != kSuccess) {
        st = fail("cuMemsetD8", m);
      }
      bytes += chunk;
    }
    if (st.ok()) {
      if (CUresult rc = d_.CtxSynchronize(); rc != kSuccess) st = fail("cuCtxSynchronize", rc);
    }
    // Verified, every byte: each chunk read back in pieces and compared with zero. A spot check
    // would pass a memset that stopped short; the read-back costs about as long as the memset
    // over PCIe, and a device changes tenant seldom.
    std::vector<unsigned char> piece(kVerifyPiece), zero(kVerifyPiece, 0);
    for (const auto& [p, n] : chunks) {
      for (size_t done = 0; st.ok() && done < n; done += piece.size()) {
        const size_t len = std::min(piece.size(), n - done);
        if (CUresult rc = d_.MemcpyDtoH(piece.data(), p + done, len); rc != kSuccess) {
          st = fail("cuMemcpyDtoH", rc);
        } else if (std::memcmp(piece.data(), zero.data(), len) != 0) {
          st = Status(StatusCode::kDataLoss, "vram scrub of " + uuid +
                                                 ": memory did not read back as zero at byte " +
                                                 std::to_string(done) + " of a chunk");
        }
      }
    }
    for (const auto& [p, n] : chunks) d_.MemFree(p);
    d_.CtxDestroy(ctx);
    if (!st.ok()) return st;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    return ScrubResult{bytes, us};
  }

 private:
  Driver d_;
};

}  // namespace

Result<std::unique_ptr<VramScrubber>> OpenCudaScrubber() {
  Driver d;
  d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d.lib == nullptr) {
    const char* err = dlerror();
    return Status::Unavailable(std::string("vram scrub: ") +
                               (err ? err : "libcuda.so.1: not found"));
  }
  const bool ok =
      Load(d.lib, "cuInit", &d.Init) && Load(d.lib, "cuDeviceGetCount", &d.DeviceGetCount) &&
      Load(d.lib, "cuDeviceGet", &d.DeviceGet) &&
      Load(d.lib, "cuDeviceGetUuid", &d.DeviceGetUuid) &&
      Load(d.lib, "cuCtxCreate_v2", &d.CtxCreate) &&
      Load(d.lib, "cuCtxDestroy_v2", &d.CtxDestroy) &&
      Load(d.lib, "cuCtxSynchronize", &d.CtxSynchronize) &&
      Load(d.lib, "cuMemGetInfo_v2", &d.MemGetInfo) && Load(d.lib, "cuMemAlloc_v2", &d.MemAlloc) &&
      Load(d.lib, "cuMemFree_v2", &d.MemFree) && Load(d.lib, "cuMemsetD8_v2", &d.MemsetD8) &&
      Load(d.lib, "cuMemcpyDtoH_v2", &d.MemcpyDtoH);
  if (!ok) {
    const char* err = dlerror();
    dlclose(d.lib);
    return Status::Unavailable(std::string("vram scrub: libcuda.so.1 lacks an entry point: ") +
                               (err ? err : "?"));
  }
  return std::unique_ptr<VramScrubber>(new CudaScrubber(d));
}

}  // namespace gpupool::agent
