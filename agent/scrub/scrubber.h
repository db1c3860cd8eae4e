// VramScrubber: zeroes what one tenant may have left in a device's memory before another tenant
// gets the device.
//
// Two implementations:
//  - CUDA (OpenCudaScrubber): libcuda.so.1 loaded with dlopen at run time (no toolkit at build
//    time). In a context on the device it allocates the free memory in chunks (cuMemGetInfo,
//    cuMemAlloc down to 2 MiB pieces), zeroes them (cuMemsetD8), synchronises, reads every byte
//    back (cuMemcpyDtoH, 16 MiB at a time) and checks it is zero, and frees them. Memory still held
//    by a running task is that task's and is not touched. A MIG instance is only reachable from
//    a process started with CUDA_VISIBLE_DEVICES=<MIG uuid>: it is scrubbed the same way by the
//    helper gpupool-scrub, run with that variable (OpenCudaScrubber's `mig_helper`); without a
//    helper CanScrub() is false for it and the agent reports that at registration.
//  - simulated (MakeSimScrubber): each device's "memory" is a file <dir>/vram-<uuid> of a fixed
//    size that tasks may write; a scrub overwrites it with zeros and reads it back to verify.
//    InjectFailure() makes the next scrub of a device fail, for tests.
//
// Thread safety: one scrub at a time per scrubber (callers serialise; DeviceGuard does).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "base/status.h"

namespace gpupool::agent {

struct ScrubResult {
  int64_t bytes = 0;   // bytes zeroed and verified
  int64_t micros = 0;  // wall time
};

class VramScrubber {
 public:
  virtual ~VramScrubber() = default;
  virtual std::string Name() const = 0;  // "cuda" | "simulated"
  virtual bool CanScrub(const std::string& uuid) const = 0;
  // Whether MIG instances are scrubbed too (the capability's detail says so).
  virtual bool ScrubsMig() const { return true; }
  // Zeroes and verifies the device's free memory. An error means the device must not be handed
  // to another tenant.
  virtual Result<ScrubResult> Scrub(const std::string& uuid) = 0;
};

class SimScrubber final : public VramScrubber {
 public:
  // Each device's memory is <dir>/vram-<uuid>, `bytes` long (created on first use, mode 0666 so
  // sandboxed tasks on the device can write it).
  SimScrubber(std::string dir, int64_t bytes);
  std::string Name() const override { return "simulated"; }
  bool CanScrub(const std::string&) const override { return true; }
  Result<ScrubResult> Scrub(const std::string& uuid) override;

  std::string PathOf(const std::string& uuid) const;
  Status EnsureFile(const std::string& uuid) const;
  void InjectFailure(const std::string& uuid) { fail_next_.insert(uuid); }

 private:
  std::string dir_;
  int64_t bytes_;
  std::set<std::string> fail_next_;
};

// Loads libcuda.so.1; an error names the library and dlerror(). `mig_helper`: the gpupool-scrub
// program MIG instances are scrubbed with (empty: they cannot be).
Result<std::unique_ptr<VramScrubber>> OpenCudaScrubber(std::string mig_helper = "");

}  // namespace gpupool::agent
