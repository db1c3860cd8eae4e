// FindCompanion: where the agent finds the programs and libraries that ship with it
// (libgpupool-cuda.so, gpupool-oci-shim, gpupool-scrub): beside the agent binary, in the build
// tree (`build_dir` under the agent's build directory's parent), in ../lib/gpupool, or in
// /usr/lib/gpupool — the first that exists (and is executable, when `executable`), canonical;
// "" when none does.
#pragma once

#include <string>

namespace gpupool::agent {

std::string FindCompanion(const std::string& agent_binary, const std::string& name,
                          const std::string& build_dir, bool executable);

}  // namespace gpupool::agent
