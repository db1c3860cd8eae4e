// The CUDA driver API through dlopen: only the handful of entry points a scrub needs, declared
// here with the driver's C ABI (no CUDA headers at build time).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "agent/scrub/scrubber.h"
#include "base/run_tool.h"

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
constexpr CUresult kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE
constexpr int64_t kMinChunk = 2ll << 20;
constexpr int64_t kMaxChunk = 1ll << 30;
constexpr size_t kVerifyPiece = 16u << 20;

struct Driver {
  void* lib = nullptr;
  CUresult (*Init)(unsigned) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*DeviceGetUuidV2)(CUuuid*, CUdevice) = nullptr;  // CUDA 11.4+: a MIG instance's own
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

bool IsMig(const std::string& uuid) { return uuid.rfind("MIG-", 0) == 0; }

// "GPU-8c0a2f6e-1b2c-..." (or "MIG-…") → the 16 bytes cuDeviceGetUuid(_v2) returns.
bool ParseUuid(const std::string& uuid, CUuuid* out) {
  if (uuid.rfind("GPU-", 0) != 0 && !IsMig(uuid)) return false;
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

// Whether this process was started to scrub MIG instance `uuid` (the helper, below): CUDA then
// enumerates that instance, and only it.
bool HelperFor(const std::string& uuid) {
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  return visible != nullptr && uuid == visible;
}

// A MIG instance is reachable only from a process started with CUDA_VISIBLE_DEVICES naming it
// (NVIDIA's MIG User Guide, "CUDA Device Enumeration": one MIG instance per CUDA process), so the
// agent scrubs one in a process of its own: `helper MIG-<uuid>` (gpupool-scrub), which prints
// "scrubbed bytes=N us=M" and exits 0, or names what failed on stderr.
Result<ScrubResult> RunHelper(const std::string& helper, const std::string& uuid) {
  ToolRun run;
  run.argv = {helper, uuid};
  // The agent's own environment (how it finds the driver), with the instance made visible.
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) run.env.push_back(*e);
  run.env.push_back("CUDA_VISIBLE_DEVICES=" + uuid);
  auto r = RunTool(run);
  if (!r.ok()) return Status::Internal("vram scrub of " + uuid + ": " + r.status().message());
  long long bytes = 0, us = 0;
  const size_t at = r->out.find("scrubbed bytes=");
  if (r->ok() && at != std::string::npos &&
      std::sscanf(r->out.c_str() + at, "scrubbed bytes=%lld us=%lld", &bytes, &us) == 2) {
    return ScrubResult{bytes, us};
  }
  std::string why = r->Describe();
  if (const size_t p = why.find("gpupool-scrub: "); p != std::string::npos) why.erase(p, 15);
  return Status::Internal("vram scrub of " + uuid + " (helper " + helper + ", " + why + ")");
}

class CudaScrubber final : public VramScrubber {
 public:
  CudaScrubber(Driver d, std::string helper) : d_(d), helper_(std::move(helper)) {}
  ~CudaScrubber() override { dlclose(d_.lib); }
  std::string Name() const override { return "cuda"; }
  bool ScrubsMig() const override { return !helper_.empty(); }
  bool CanScrub(const std::string& uuid) const override {
    if (uuid.rfind("GPU-", 0) == 0) return true;
    return IsMig(uuid) && (!helper_.empty() || HelperFor(uuid));
  }

  Result<ScrubResult> Scrub(const std::string& uuid) override {
    if (IsMig(uuid) && !HelperFor(uuid)) {
      if (helper_.empty()) {
        return Status::FailedPrecondition("vram scrub of " + uuid +
                                          ": a MIG instance is scrubbed by gpupool-scrub in a "
                                          "process of its own, and none was found");
      }
      return RunHelper(helper_, uuid);
    }
    const auto start = std::chrono::steady_clock::now();
    auto fail = [&](const char* call, CUresult rc) {
      return Status::Internal("vram scrub of " + uuid + ": " + call + " failed (CUresult " +
                              std::to_string(rc) + ")");
    };
    CUuuid want{};
    if (!ParseUuid(uuid, &want)) {
      return Status::InvalidArgument("vram scrub: '" + uuid + "' is not a GPU UUID");
    }
    if (CUresult rc = d_.Init(0); rc != kSuccess) {
      // CUDA_VISIBLE_DEVICES naming an instance the node lacks leaves CUDA no device at all.
      if (rc == kNoDevice && HelperFor(uuid))
        return Status::NotFound("vram scrub: no CUDA device with UUID " + uuid);
      return fail("cuInit", rc);
    }
    int count = 0;
    if (CUresult rc = d_.DeviceGetCount(&count); rc != kSuccess)
      return fail("cuDeviceGetCount", rc);
    CUdevice dev = -1;
    // A MIG instance's own UUID comes from cuDeviceGetUuid_v2; cuDeviceGetUuid names its GPU.
    auto get_uuid = IsMig(uuid) ? d_.DeviceGetUuidV2 : d_.DeviceGetUuid;
    if (get_uuid == nullptr) {
      return Status::FailedPrecondition("vram scrub of " + uuid +
                                        ": the driver has no cuDeviceGetUuid_v2 (CUDA 11.4+)");
    }
    for (int i = 0; i < count && dev < 0; ++i) {
      CUdevice d = 0;
      CUuuid u{};
      if (d_.DeviceGet(&d, i) == kSuccess && get_uuid(&u, d) == kSuccess &&
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
  const std::string helper_;
};

}  // namespace

Result<std::unique_ptr<VramScrubber>> OpenCudaScrubber(std::string mig_helper) {
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
  // Optional: drivers before CUDA 11.4 lack it, and then MIG instances cannot be told apart.
  d.DeviceGetUuidV2 =
      reinterpret_cast<decltype(d.DeviceGetUuidV2)>(dlsym(d.lib, "cuDeviceGetUuid_v2"));
  return std::unique_ptr<VramScrubber>(new CudaScrubber(d, std::move(mig_helper)));
}

}  // namespace gpupool::agent
