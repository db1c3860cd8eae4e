// Cgroups for task sandboxes: find the hierarchies, make one group per task with its limits,
// read its usage back, remove it.
//
// Two layouts exist in the wild and both are handled:
//  - cgroup v1: one mount per controller (or a few combined); a task gets a directory
//    <mount>/<parent>/<name> in each of memory, cpu, cpuacct, pids and devices. Devices are
//    filtered with devices.deny "a" followed by one devices.allow line per permitted device.
//  - cgroup v2: one unified tree; the task's directory <mount>/<parent>/<name> gets memory.max,
//    cpu.max and pids.max. v2 has no devices controller: devices are filtered by an eBPF program
//    attached to the task's group (bpf_device_filter.h), where the kernel loads one for us
//    (Detect() probes it); where it does not, `devices_enforced()` is false and the agent says so
//    at registration.
// A controller is used from v2 when the unified tree offers it, else from its v1 mount.
//
// Limits: memory = the request's host memory (memory.limit_in_bytes / memory.max, plus the
// memory+swap limit on v1 so swap is no escape); CPU = a CFS quota of cpu_milli/1000 CPUs per
// 100 ms period; pids = a fixed ceiling. 0 means "no limit" for memory and CPU.
//
// Processes join a group by writing "0" to each `procs` file (JoinFds gives open descriptors, so
// a freshly cloned child can join before it execs anything — see launch.h).
//
// Thread safety: CgroupLayout is immutable after Detect(); TaskCgroup is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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
  bool v2_bpf_devices = false;  // the kernel loads cgroup device programs (Detect() probes)

  // Reads /proc/self/mountinfo (or `mountinfo` text, for tests).
  static CgroupLayout Detect();
  static CgroupLayout FromMountinfo(const std::string& mountinfo,
                                    const std::string& v2_controllers_text);

  bool Has(Controller c) const;
  bool OnV2(Controller c) const;
  // The host can filter devices per task: the v1 devices controller is mounted, or the tasks'
  // groups are on v2 and the kernel takes our eBPF device program.
  bool devices_enforced() const { return v1.count(Controller::kDevices) > 0 || devices_by_bpf(); }
  bool devices_by_bpf() const {
    return v1.count(Controller::kDevices) == 0 && !v2.empty() && v2_bpf_devices;
  }
  std::string Describe() const;  // "v1: memory cpu cpuacct pids devices"
};

struct CgroupLimits {
  int64_t memory_bytes = 0;  // 0 = unlimited
  int64_t cpu_milli = 0;     // 0 = unlimited
  int64_t pids_max = 0;      // 0 = unlimited
  // Device rules (v1 syntax "c 195:0 rw"); applied only when devices are enforced. Empty with
  // `filter_devices` = nothing but the rules' baseline.
  bool filter_devices = false;
  std::vector<std::string> device_rules;
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

class TaskCgroup {
 public:
  // Creates <parent>/<name> in every available controller and writes the limits. On any failure
  // everything created so far is removed and the error names the file.
  static Result<std::unique_ptr<TaskCgroup>> Create(const CgroupLayout& layout,
                                                    const std::string& parent,
                                                    const std::string& name,
                                                    const CgroupLimits& limits);
  ~TaskCgroup();  // Remove()

  // Open O_WRONLY descriptors of each distinct `cgroup.procs` (caller closes them).
  Result<std::vector<int>> OpenProcsFds() const;
  const std::vector<std::string>& dirs() const { return dirs_; }

  CgroupUsage Usage() const;
  // SIGKILLs whatever is still inside, then removes the directories (retrying while the kernel
  // finishes tearing the processes down). Returns false if a directory is still busy.
  bool Remove();
  // Keeps the group as it is when this object goes (its task outlives the agent process).
  void Abandon() { removed_ = true; }

  // Kills and removes a group left by a previous agent process (its dirs from the state file).
  static void KillAndRemove(const std::vector<std::string>& dirs);
  // The group Create() made for <parent>/<name> under a previous agent process, whose task a
  // restarted agent re-adopts: nothing is created or written. NotFound naming the directory when
  // one is gone.
  static Result<std::unique_ptr<TaskCgroup>> Adopt(const CgroupLayout& layout,
                                                   const std::string& parent,
                                                   const std::string& name);

 private:
  TaskCgroup() = default;
  const CgroupLayout* layout_ = nullptr;
  std::map<Controller, std::string> dir_of_;
  std::vector<std::string> dirs_;  // distinct directories, creation order
  bool removed_ = false;
};

// Standard device rules every sandbox allows (null, zero, full, random, urandom, tty, ptmx, pts).
std::vector<std::string> BaselineDeviceRules();
// "c MAJ:MIN rw" for a character device file; an error names the path when it is not one.
Result<std::string> DeviceRuleFor(const std::string& path);

}  // namespace gpupool::agent::sandbox
