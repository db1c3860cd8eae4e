// Driver files: the host NVIDIA driver's user-space files a GPU task in a container needs, found
// on the node so the agent can bind them into the task read-only at their own paths — what the
// NVIDIA Container Toolkit does for the "compute" and "utility" driver capabilities (its user
// guide, "Driver Capabilities": compute is "required for CUDA and OpenCL applications", utility
// "required for using nvidia-smi and NVML";
// https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
// An image carries the CUDA runtime but never the driver: the driver must match the node's
// kernel module, so it comes from the node.
//
// Libraries: in each of `library_dirs` (the directory of the libnvidia-ml.so.1 the agent loaded,
// where the driver's installer puts all of them), every file or link whose name is one of
// kDriverLibraries followed by a version suffix — `libcuda.so.1` (the soname link programs load)
// and `libcuda.so.550.54.15` (the file it points to). The bare development link (`libcuda.so`)
// is left out: it belongs to a CUDA toolkit, not to a task. Binaries: the first of each of
// kDriverBinaries found in `bin_dirs`.
//
// Thread safety: a pure function of the file system.
#pragma once

#include <string>
#include <vector>

namespace gpupool::agent {

// Library names (without version suffix) of the compute and utility capabilities.
inline constexpr const char* kDriverLibraries[] = {
    "libcuda.so",        "libcudadebugger.so",   "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so", "libnvidia-gpucomp.so", "libnvidia-opencl.so",
    "libnvidia-ml.so",   "libnvidia-cfg.so",
};
inline constexpr const char* kDriverBinaries[] = {
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
};

// Absolute paths, sorted and without duplicates; empty when nothing is found.
std::vector<std::string> FindDriverFiles(const std::vector<std::string>& library_dirs,
                                         const std::vector<std::string>& bin_dirs);

// The directory a loaded shared object lives in (`handle` from dlopen), symlinks resolved; empty
// when it cannot be told.
std::string LoadedLibraryDir(void* handle);

}  // namespace gpupool::agent
