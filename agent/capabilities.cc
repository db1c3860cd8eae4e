#include "agent/capabilities.h"

#include "agent/images.h"
#include "agent/mps/mps_manager.h"
#include "agent/networks.h"
#include "agent/scrub/device_guard.h"
#include "agent/slices/slice_ledgers.h"

namespace gpupool::agent {

std::vector<sandbox::Capability> NodeCapabilities(const TaskRunnerOptions& runner,
                                                  const DeviceBackend* backend) {
  std::vector<sandbox::Capability> out =
      runner.sandbox ? runner.sandbox->Capabilities(
                           runner.containers ? runner.containers->options().launcher.runc : "",
                           runner.containers_off)
                     : sandbox::Sandbox::DisabledCapabilities();
  for (const sandbox::Capability& c : runner.slices
                                          ? runner.slices->Capabilities()
                                          : SliceLedgers::DisabledCapabilities(runner.slices_off)) {
    out.push_back(c);
  }
  out.push_back(ImagesCapability(runner.containers, runner.containers_off));
  out.push_back(NetworkCapability(runner.sandbox != nullptr, runner.containers != nullptr,
                                  runner.networks, runner.networks_off, runner.default_network));
  if (runner.mps) {
    out.push_back({"mps", true, runner.mps->Describe()});
  } else {
    out.push_back({"mps", false,
                   "not managed (mps.enabled: false): tasks get CUDA_MPS_ACTIVE_THREAD_PERCENTAGE "
                   "and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, but no MPS control daemon is started, "
                   "so fractional compute and memory limits are not enforced"});
  }
  if (runner.device_guard) {
    out.push_back({"vram_scrub", true, runner.device_guard->CapabilityDetail()});
  } else {
    out.push_back(
        {"vram_scrub", false,
         "off (vram_scrub: false): freed VRAM is handed to the next tenant as it was left"});
  }
  const std::string source = backend != nullptr ? backend->EventSource() : "";
  if (source.empty()) {
    out.push_back({"xid_events", false, "not collected: XID and ECC events are not watched"});
  } else {
    out.push_back({"xid_events", true,
                   source + "; a fatal XID (48, 62, 64, 74, 79, 92, 95, 119, 120, 140) or an "
                            "uncorrectable ECC error fails the device's tasks and keeps it out "
                            "of service until an admin clears it"});
  }
  return out;
}

}  // namespace gpupool::agent
