#include "agent/capabilities.h"

#include "agent/scrub/device_guard.h"

namespace gpupool::agent {

std::vector<sandbox::Capability> NodeCapabilities(const TaskRunnerOptions& runner) {
  std::vector<sandbox::Capability> out =
      runner.sandbox ? runner.sandbox->Capabilities() : sandbox::Sandbox::DisabledCapabilities();
  out.push_back({"mps", false,
                 "not managed: tasks get CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and "
                 "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, but no MPS control daemon is started, so "
                 "fractional compute and memory limits are not enforced"});
  if (runner.device_guard) {
    out.push_back({"vram_scrub", true, runner.device_guard->CapabilityDetail()});
  } else {
    out.push_back(
        {"vram_scrub", false,
         "off (vram_scrub: false): freed VRAM is handed to the next tenant as it was left"});
  }
  out.push_back({"xid_events", false, "not collected: XID and ECC events are not watched"});
  return out;
}

}  // namespace gpupool::agent
