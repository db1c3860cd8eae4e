// The CUDA VRAM scrub against the fake driver (tests/fakes/cuda, loaded as libcuda.so.1 through
// LD_LIBRARY_PATH, which ctest sets): its device memory keeps what a process wrote after the
// process ends, as the driver's reference says of cuMemAlloc ("The memory is not cleared"). A
// tenant writes a secret and dies; without a scrub the next allocation reads it back; after the
// agent's scrub every byte of free memory reads as zero, and the scrub says how many it zeroed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/scrub/scrubber.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/fakes/cuda/fake_state.h"

namespace gpupool::agent {
namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

constexpr uint64_t kDevice = 16u << 20;  // a small device: every byte is written and read back
constexpr char kSecret[] = "tenant-a: model weights, keep out";

struct Cuda {
  void* lib = nullptr;
  CUresult (*Init)(unsigned);
  CUresult (*CtxCreate)(void**, unsigned, int);
  CUresult (*CtxDestroy)(void*);
  CUresult (*MemGetInfo)(size_t*, size_t*);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*HtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*DtoH)(void*, CUdeviceptr, size_t);
  template <typename F>
  void Load(const char* name, F* out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    ASSERT_NE(*out, nullptr) << name;
  }
};

class CudaScrubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = testing::TempDir("/tmp/gpupool-cuda-scrub-");
    setenv("GPUPOOL_FAKE_CUDA_STATE", state_.c_str(), 1);
    setenv("GPUPOOL_FAKE_CUDA_DEVICES",
           ("scrub 16MiB," + std::to_string(kDevice) + ",8,1048576").c_str(), 1);
    cuda_.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(cuda_.lib, nullptr) << "the fake driver (LD_LIBRARY_PATH): " << dlerror();
    ASSERT_NE(dlsym(cuda_.lib, "cuMemsetD8_v2"), nullptr);
    cuda_.Load("cuInit", &cuda_.Init);
    cuda_.Load("cuCtxCreate_v2", &cuda_.CtxCreate);
    cuda_.Load("cuCtxDestroy_v2", &cuda_.CtxDestroy);
    cuda_.Load("cuMemGetInfo_v2", &cuda_.MemGetInfo);
    cuda_.Load("cuMemAlloc_v2", &cuda_.MemAlloc);
    cuda_.Load("cuMemFree_v2", &cuda_.MemFree);
    cuda_.Load("cuMemcpyHtoD_v2", &cuda_.HtoD);
    cuda_.Load("cuMemcpyDtoH_v2", &cuda_.DtoH);
    ASSERT_EQ(cuda_.Init(0), 0);
  }
  void TearDown() override {
    if (cuda_.lib != nullptr) dlclose(cuda_.lib);
    std::filesystem::remove_all(state_);
  }

  // A tenant's process: fills 4 MiB with the secret and dies without freeing it (the driver
  // frees a dead process's memory, not its contents).
  void TenantWritesASecretAndDies() {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      void* ctx = nullptr;
      CUdeviceptr p = 0;
      std::vector<char> data(4u << 20);
      for (size_t i = 0; i < data.size(); ++i) data[i] = kSecret[i % (sizeof kSecret - 1)];
      const bool ok = cuda_.CtxCreate(&ctx, 0, 0) == 0 && cuda_.MemAlloc(&p, data.size()) == 0 &&
                      cuda_.HtoD(p, data.data(), data.size()) == 0;
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the tenant's writes failed";
  }

  // Everything a new process could allocate now, read back: how many bytes are not zero, and
  // whether the secret is among them.
  struct Seen {
    uint64_t bytes = 0, nonzero = 0;
    bool secret = false;
  };
  Seen ReadAllFreeMemory() {
    Seen seen;
    void* ctx = nullptr;
    EXPECT_EQ(cuda_.CtxCreate(&ctx, 0, 0), 0);
    size_t free_b = 0, total = 0;
    EXPECT_EQ(cuda_.MemGetInfo(&free_b, &total), 0);
    CUdeviceptr p = 0;
    EXPECT_EQ(cuda_.MemAlloc(&p, free_b), 0) << free_b;
    std::vector<char> data(free_b);
    EXPECT_EQ(cuda_.DtoH(data.data(), p, data.size()), 0);
    seen.bytes = data.size();
    seen.nonzero = data.size() - std::count(data.begin(), data.end(), 0);
    seen.secret =
        std::search(data.begin(), data.end(), kSecret, kSecret + sizeof kSecret - 1) != data.end();
    EXPECT_EQ(cuda_.MemFree(p), 0);
    EXPECT_EQ(cuda_.CtxDestroy(ctx), 0);
    return seen;
  }

  std::string state_;
  Cuda cuda_;
};

TEST_F(CudaScrubTest, WithoutAScrubTheNextTenantReadsTheLastOnesBytes) {
  TenantWritesASecretAndDies();
  const Seen seen = ReadAllFreeMemory();
  EXPECT_TRUE(seen.secret) << "the fake must keep freed memory's contents, as a GPU does";
  EXPECT_GE(seen.nonzero, 4u << 20);
}

TEST_F(CudaScrubTest, AfterTheScrubEveryFreeByteReadsZero) {
  TenantWritesASecretAndDies();
  auto scrubber = OpenCudaScrubber();
  ASSERT_TRUE(scrubber.ok()) << scrubber.status().ToString();
  const std::string uuid = fakecuda::FakeUuid(0);
  ASSERT_TRUE((*scrubber)->CanScrub(uuid));
  auto scrubbed = (*scrubber)->Scrub(uuid);
  ASSERT_TRUE(scrubbed.ok()) << scrubbed.status().ToString();
  // All of the device but its context (1 MiB) and what the allocator's 2 MiB floor leaves.
  EXPECT_GE(scrubbed->bytes, int64_t{kDevice - (3u << 20)});
  EXPECT_LE(scrubbed->bytes, int64_t{kDevice});
  const Seen seen = ReadAllFreeMemory();
  EXPECT_FALSE(seen.secret);
  EXPECT_EQ(seen.nonzero, 0u) << "of " << seen.bytes << " bytes";
  // A device the driver does not have is named.
  auto missing = (*scrubber)->Scrub("GPU-00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no CUDA device with UUID"), std::string::npos);
}

// A program run as a MIG instance's tenant would be: `CUDA_VISIBLE_DEVICES` names the instance.
// Returns its exit code and output.
std::pair<int, std::string> RunOn(const std::string& visible, std::vector<std::string> args) {
  int out[2];
  if (pipe(out) != 0) return {-1, "pipe"};
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
    dup2(out[1], 1);
    dup2(out[1], 2);
    close(out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

// A MIG instance is reachable only from a process whose CUDA_VISIBLE_DEVICES names it (the fake
// models NVIDIA's enumeration rule), so the agent's own process cannot scrub one: the scrubber
// runs gpupool-scrub with that variable. Tenant A's secret in the instance's memory is read by
// the next tenant without a scrub and gone after one; the whole GPU is untouched by it.
TEST_F(CudaScrubTest, AMigInstanceIsScrubbedInAHelperProcess) {
  setenv("GPUPOOL_FAKE_CUDA_DEVICES",
         ("scrub 16MiB," + std::to_string(kDevice) + ",8,1048576;mig:1g.8mb,8388608,2,1048576")
             .c_str(),
         1);
  const std::string mig = fakecuda::FakeUuid(fakecuda::kMigBase);
  ASSERT_EQ(mig.rfind("MIG-", 0), 0u);
  auto [wrote, w] = RunOn(mig, {GPUPOOL_GPU_PROBE, "write", "TENANT-A-MIG-SECRET"});
  ASSERT_EQ(wrote, 0) << w;
  EXPECT_NE(w.find("wrote 6 MiB"), std::string::npos) << w;  // 8 MiB less its context, in chunks
  auto [leaked, l] = RunOn(mig, {GPUPOOL_GPU_PROBE, "read", "TENANT-A-MIG-SECRET"});
  EXPECT_EQ(leaked, 4) << "without a scrub the next tenant reads it: " << l;

  auto without = OpenCudaScrubber();
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE((*without)->CanScrub(mig));  // no helper: said at registration, not attempted
  auto refused = (*without)->Scrub(mig);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("gpupool-scrub"), std::string::npos);

  auto scrubber = OpenCudaScrubber(GPUPOOL_SCRUB_HELPER);
  ASSERT_TRUE(scrubber.ok());
  ASSERT_TRUE((*scrubber)->CanScrub(mig));
  auto scrubbed = (*scrubber)->Scrub(mig);
  ASSERT_TRUE(scrubbed.ok()) << scrubbed.status().ToString();
  EXPECT_GE(scrubbed->bytes, int64_t{6} << 20);
  EXPECT_LE(scrubbed->bytes, int64_t{8} << 20);
  auto [clean, c] = RunOn(mig, {GPUPOOL_GPU_PROBE, "read", "TENANT-A-MIG-SECRET"});
  EXPECT_EQ(clean, 0) << c;
  EXPECT_NE(c.find("found 0 block"), std::string::npos) << c;
  // An instance the driver does not have: the helper's reason comes back.
  auto missing = (*scrubber)->Scrub("MIG-00000000-0000-0000-0000-000000000000");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no CUDA device with UUID"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace gpupool::agent
