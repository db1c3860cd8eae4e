// gpu_probe: the task side of scripts/gpu-verify, run as a gpupool task on a real NVIDIA GPU. It
// speaks the CUDA driver API through dlopen("libcuda.so.1") like the agent's scrubber, so it
// builds without a CUDA toolkit; the busy kernel is PTX the driver compiles at load time.
//
//   gpu_probe alloc MIB        allocate MIB in 256 MiB steps; prints "allocated N MiB" and
//                              exits 0 when all of it was granted, 3 when the driver refused
//                              (what an MPS pinned-memory limit does past the task's slice)
//   gpu_probe busy SECONDS     runs a spinning kernel on every SM for SECONDS; prints
//                              "kernels_per_s X" (compare alone vs. under an MPS thread %)
//   gpu_probe write TAG [MIB]  fills all free memory (at most MIB) with TAG repeated, then exits
//                              (tenant A)
//   gpu_probe read TAG [MIB]   allocates all free memory (at most MIB) and counts 4 KiB blocks
//                              holding TAG; prints "found N" and exits 4 when N > 0 (tenant B)
//
// Exit 2 on bad usage, 5 when libcuda or a call fails (the message names it).
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;
constexpr int kAttrSmCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT

struct Driver {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*CtxCreate)(CUcontext*, unsigned, CUdevice);
  CUresult (*CtxSynchronize)();
  CUresult (*MemGetInfo)(size_t*, size_t*);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**);
};

Driver d;

[[noreturn]] void Die(const char* what, CUresult rc) {
  std::fprintf(stderr, "gpu_probe: %s failed (CUresult %d)\n", what, rc);
  std::exit(5);
}

void Check(const char* what, CUresult rc) {
  if (rc != 0) Die(what, rc);
}

template <typename F>
void Load(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) {
    std::fprintf(stderr, "gpu_probe: libcuda.so.1 has no %s\n", name);
    std::exit(5);
  }
}

CUdevice Open() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    std::fprintf(stderr, "gpu_probe: cannot load libcuda.so.1: %s\n", dlerror());
    std::exit(5);
  }
  Load(lib, "cuInit", &d.Init);
  Load(lib, "cuDeviceGet", &d.DeviceGet);
  Load(lib, "cuDeviceGetAttribute", &d.DeviceGetAttribute);
  Load(lib, "cuCtxCreate_v2", &d.CtxCreate);
  Load(lib, "cuCtxSynchronize", &d.CtxSynchronize);
  Load(lib, "cuMemGetInfo_v2", &d.MemGetInfo);
  Load(lib, "cuMemAlloc_v2", &d.MemAlloc);
  Load(lib, "cuMemcpyHtoD_v2", &d.MemcpyHtoD);
  Load(lib, "cuMemcpyDtoH_v2", &d.MemcpyDtoH);
  Load(lib, "cuModuleLoadData", &d.ModuleLoadData);
  Load(lib, "cuModuleGetFunction", &d.ModuleGetFunction);
  Load(lib, "cuLaunchKernel", &d.LaunchKernel);
  Check("cuInit", d.Init(0));
  CUdevice dev = 0;
  Check("cuDeviceGet", d.DeviceGet(&dev, 0));  // the task sees only its grant
  CUcontext ctx = nullptr;
  Check("cuCtxCreate", d.CtxCreate(&ctx, 0, dev));
  return dev;
}

// Allocates free memory in chunks (1 GiB down to 2 MiB) until the driver refuses or `limit`
// bytes are held.
std::vector<std::pair<CUdeviceptr, size_t>> GrabAll(size_t limit) {
  std::vector<std::pair<CUdeviceptr, size_t>> out;
  size_t held = 0;
  for (size_t chunk = size_t{1} << 30; chunk >= (size_t{2} << 20);) {
    CUdeviceptr p = 0;
    if (held + chunk <= limit && d.MemAlloc(&p, chunk) == 0) {
      out.emplace_back(p, chunk);
      held += chunk;
    } else {
      chunk /= 2;
    }
  }
  return out;
}

int Alloc(long mib) {
  Open();
  long got = 0;
  while (got < mib) {
    const long step = std::min(256L, mib - got);
    CUdeviceptr p = 0;
    const CUresult rc = d.MemAlloc(&p, static_cast<size_t>(step) << 20);
    if (rc != 0) {
      std::printf("allocated %ld MiB of %ld; refused at %ld MiB (CUresult %d)\n", got, mib,
                  got + step, rc);
      return 3;
    }
    got += step;
  }
  std::printf("allocated %ld MiB\n", got);
  return 0;
}

// Each thread spins `iters` multiply-adds, then thread 0 of the block writes its result.
constexpr char kSpinPtx[] = R"(
.version 6.0
.target sm_50
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 iters) {
  .reg .pred %p;
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.u32 %r2, 0;
  mov.u32 %r3, 1;
LOOP:
  mad.lo.u32 %r3, %r3, 1664525, 1013904223;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p, %r2, %r1;
  @%p bra LOOP;
  mov.u32 %r4, %ctaid.x;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r4, 4;
  add.u64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r3;
  ret;
}
)";

int Busy(double seconds) {
  const CUdevice dev = Open();
  int sms = 0;
  Check("cuDeviceGetAttribute", d.DeviceGetAttribute(&sms, kAttrSmCount, dev));
  CUmodule mod = nullptr;
  Check("cuModuleLoadData", d.ModuleLoadData(&mod, kSpinPtx));
  CUfunction fn = nullptr;
  Check("cuModuleGetFunction", d.ModuleGetFunction(&fn, mod, "spin"));
  const unsigned blocks = static_cast<unsigned>(sms) * 8;
  CUdeviceptr out = 0;
  Check("cuMemAlloc", d.MemAlloc(&out, blocks * 4));
  unsigned iters = 1 << 16;
  void* args[] = {&out, &iters};
  const auto start = std::chrono::steady_clock::now();
  long kernels = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    Check("cuLaunchKernel", d.LaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
    Check("cuCtxSynchronize", d.CtxSynchronize());
    ++kernels;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("sms %d blocks %u kernels %ld seconds %.2f kernels_per_s %.2f\n", sms, blocks,
              kernels, elapsed, kernels / elapsed);
  return 0;
}

std::vector<char> Pattern(const std::string& tag, size_t n) {
  std::vector<char> buf(n);
  // Every 4 KiB block starts with the tag, so Read() finds it at any block it checks.
  for (size_t i = 0; i < n; ++i) buf[i] = tag[(i % 4096) % tag.size()];
  return buf;
}

int Write(const std::string& tag, size_t limit) {
  Open();
  const std::vector<char> pattern = Pattern(tag, size_t{2} << 20);
  size_t bytes = 0;
  for (const auto& [p, n] : GrabAll(limit)) {
    for (size_t off = 0; off < n; off += pattern.size()) {
      Check("cuMemcpyHtoD", d.MemcpyHtoD(p + off, pattern.data(), pattern.size()));
    }
    bytes += n;
  }
  Check("cuCtxSynchronize", d.CtxSynchronize());
  std::printf("wrote %zu MiB of '%s'\n", bytes >> 20, tag.c_str());
  return 0;
}

int Read(const std::string& tag, size_t limit) {
  Open();
  std::vector<char> block(size_t{2} << 20);
  size_t bytes = 0, found = 0;
  for (const auto& [p, n] : GrabAll(limit)) {
    for (size_t off = 0; off < n; off += block.size()) {
      Check("cuMemcpyDtoH", d.MemcpyDtoH(block.data(), p + off, block.size()));
      for (size_t b = 0; b < block.size(); b += 4096) {
        found += std::memcmp(block.data() + b, tag.data(), tag.size()) == 0;
      }
    }
    bytes += n;
  }
  std::printf("read %zu MiB; found %zu block(s) holding '%s'\n", bytes >> 20, found, tag.c_str());
  return found > 0 ? 4 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc == 3 && mode == "alloc") return Alloc(std::atol(argv[2]));
  if (argc == 3 && mode == "busy") return Busy(std::atof(argv[2]));
  const size_t limit = argc == 4 ? static_cast<size_t>(std::atol(argv[3])) << 20 : SIZE_MAX;
  if ((argc == 3 || argc == 4) && mode == "write") return Write(argv[2], limit);
  if ((argc == 3 || argc == 4) && mode == "read") return Read(argv[2], limit);
  std::fprintf(stderr,
               "usage: gpu_probe alloc MIB | busy SECONDS | write TAG [MIB] | read TAG [MIB] "
               "(see scripts/gpu-verify)\n");
  return 2;
}
