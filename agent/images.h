// Images on the node (config `images:`, docs/images.md): the node's image store and the
// ContainerFactory that runs image tasks through runc, built from the agent's config.
//
// Image tasks need the sandbox (its uid pool gives each container its own unprivileged ids, and
// containers take them from the same map, so no two tasks share one) and the OCI tools: skopeo
// and umoci for pulls, runc to run, the agent's gpupool-oci-shim. OpenContainers says which is
// missing; the agent then runs without images and reports the `images` capability not enforced.
//
// Thread safety: OpenContainers may be called from any thread; the factory it returns is safe
// from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/oci/container.h"
#include "agent/sandbox/sandbox.h"
#include "base/status.h"

namespace gpupool::agent {

struct ImageOptions {
  bool enabled = true;
  std::string dir;              // the image store; "" = <data_dir>/images
  int64_t budget_mib = 0;       // blobs kept at most; 0 = no budget (least recently used go first)
  bool tls_verify = true;       // false: registries may speak plain HTTP (a loopback test registry)
  int64_t tag_ttl_ms = 60'000;  // how long an anonymous tag's resolution is trusted (image_store.h)
  std::string runc = "runc";
  std::string shim;  // gpupool-oci-shim; "" = beside the agent (DefaultShim)
  std::string seccomp_profile = oci::kDefaultSeccompProfile;
  // Datasets tasks may mount read-only as volumes (TaskTemplate.volumes), name → host directory.
  std::map<std::string, std::string> datasets;
  // Tests only (fake GPU hardware): ContainerFactoryOptions::simulated_gpu_state.
  std::string simulated_gpu_state;
};

// gpupool-oci-shim beside `agent_binary`, in the build tree (agent/ beside cmd/) or packaged
// (/usr/lib/gpupool); "" when nowhere.
std::string DefaultShim(const std::string& agent_binary);

// The node's container factory: an image store under `options.dir` and runc with its state in
// <data_dir>/runc, and isolated networks from `networks` (null: none). FAILED_PRECONDITION naming
// what is missing (no sandbox, a tool, the shim).
Result<std::shared_ptr<oci::ContainerFactory>> OpenContainers(
    const ImageOptions& options, const std::shared_ptr<sandbox::Sandbox>& sandbox,
    const std::string& data_dir, const std::string& agent_binary,
    const std::shared_ptr<net::TaskNetworks>& networks = nullptr);

// The `images` capability: enforced with how, or not with `why`.
sandbox::Capability ImagesCapability(const std::shared_ptr<oci::ContainerFactory>& containers,
                                     const std::string& why);

}  // namespace gpupool::agent
