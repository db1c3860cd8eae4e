// Cgroups as the node has them: where each controller is mounted (v1, v2 or both), what a
// container's groups used, and the removal of groups an older agent left behind. The groups
// themselves are made and limited by the OCI runtime from the spec the agent writes
// (agent/oci/spec.h); runc writes the same limits to v1 or v2 files and filters devices with the
// v1 devices controller or, on v2, an eBPF program of its own.
//
// A controller is used from v2 when the unified tree offers it, else from its v1 mount.
//
// Thread safety: CgroupLayout is immutable after Detect(); the functions are safe anywhere.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent::sandbox {

enum class Controller { kMemory, kCpu, kCpuacct, kPids, kDevices };
const char* ControllerName(Controller c);

struct CgroupLayout {
  // Where each controller lives; absent = not available on this host.
  std::map<Controller, std::string> v1;  // controller → v1 mount point
  std::string v2;                        // the unified mount point, when it holds controllers
  std::vector<Controller> v2_controllers;

  // Reads /proc/self/mountinfo (or `mountinfo` text, for tests).
  static CgroupLayout Detect();
  static CgroupLayout FromMountinfo(const std::string& mountinfo,
                                    const std::string& v2_controllers_text);

  bool Has(Controller c) const;
  bool OnV2(Controller c) const;
  std::string Describe() const;  // "v1: memory cpu cpuacct pids devices"
};

struct CgroupUsage {
  int64_t cpu_usec = 0;
  int64_t peak_memory_bytes = 0;
  int64_t oom_kills = 0;
};

// What a group used, from its controllers' directories (`dir_of`: controller → its directory):
// peak memory and OOM kills from the memory controller, CPU time from cpuacct (cpu.stat on v2).
CgroupUsage ReadCgroupUsage(const CgroupLayout& layout,
                            const std::map<Controller, std::string>& dir_of);
// The directories process `pid` is in, for the memory and cpuacct controllers, from
// /proc/<pid>/cgroup (a container's group, which runc made): empty when the process is gone.
std::map<Controller, std::string> CgroupDirsOf(const CgroupLayout& layout, pid_t pid);

// SIGKILLs whatever is still in each of `dirs` (a task's groups an older agent's hand-written
// sandbox made, from its state file), then removes them, retrying while the kernel tears the
// processes down.
void KillAndRemoveGroups(const std::vector<std::string>& dirs);

}  // namespace gpupool::agent::sandbox
