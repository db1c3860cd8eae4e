// Sandbox: what confines one task on a node — its cgroup (memory, CPU, pids, devices), its
// unprivileged uid, its work directory, and its own mount/PID/IPC namespaces (launch.h).
//
// The agent makes one Sandbox at start (Create checks that it can: root, cgroups found, the
// hidden paths exist) and asks it to Prepare() each task. Prepare takes a uid, creates
// <task dir>/work (0700, owned by that uid) and the task's cgroup with its limits and device
// rules; Launch() starts the program inside; Release() after the task ended reads nothing more,
// kills stragglers, removes the cgroup, gives the uid back and locks the work dir (root, 0700).
// Any failure is an error naming what failed; the runner then fails the task — it never starts
// a task unconfined when the sandbox is on.
//
// Capabilities() says, for Register, what this node can and cannot enforce.
//
// Thread safety: Sandbox is safe from any thread; a SandboxedTask belongs to one task.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/launch.h"
#include "agent/sandbox/uids.h"
#include "base/status.h"

namespace gpupool::agent::sandbox {

struct SandboxOptions {
  bool enabled = false;
  std::string cgroup_parent = "gpupool";  // task groups are <controller mount>/<this>/<task>
  int64_t uid_pool_first = 0;
  int64_t uid_pool_count = 0;
  std::map<std::string, std::string> tenant_users;  // tenant → user name or "#uid"
  int64_t pids_max = 4096;
  int64_t default_memory_mib = 0;       // for a task whose request names no host memory; 0 = none
  std::vector<std::string> hide_paths;  // files or directories tasks must not see
  std::vector<std::string> private_tmp = {"/tmp", "/var/tmp", "/dev/shm"};
  // What of the host a plain command sees where it runs under the OCI runtime (docs/sandbox.md,
  // "Plain commands under runc"): these directories, read-only; nothing else of the host.
  std::vector<std::string> host_dirs = {"/usr", "/etc", "/opt"};
};

// One thing a node can (or cannot) enforce, as reported at registration.
struct Capability {
  std::string name;  // sandbox, memory, cpu, pids, devices, uid, namespaces (agent/capabilities.h
                     // adds mps, vram_scrub, xid_events)
  bool enforced = false;
  std::string detail;
};

struct SandboxRequest {
  std::string name;  // unique per task attempt: the cgroup's name
  std::string tenant;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::string task_dir;                   // exists, root-owned
  std::vector<std::string> device_files;  // granted and control device files the task may open
  // The task is a client of its tenant's MPS daemon: it runs as the tenant's shared uid
  // (UidMap::AcquireShared), as MPS serves one uid at a time.
  bool tenant_uid = false;
  // The task's network (agent/net/task_network.h decides which): its own namespace with only
  // loopback (`own_network`), the prepared namespace at `netns_path` (isolated), or, with neither,
  // the node's.
  bool own_network = false;
  std::string netns_path;
  std::string resolv_conf;  // bound read-only over /etc/resolv.conf when set (isolated networks)
};

class SandboxedTask {
 public:
  ~SandboxedTask();
  // `ledger_dir` (optional): a GPU slice's ledger directory, bound at <work dir>/.gpupool.
  Result<Launched> Launch(const std::string& exec_path, const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, int log_fd,
                          const std::string& ledger_dir = "");
  CgroupUsage Usage() const { return cgroup_->Usage(); }
  void Release();
  // Lets go without releasing anything: the task runs on for the next agent process, which
  // adopts it (Sandbox::Adopt). Its cgroup and uid stay.
  void Abandon() {
    released_ = true;
    if (cgroup_) cgroup_->Abandon();
  }
  const std::string& work_dir() const { return work_dir_; }
  const TaskIdentity& identity() const { return id_; }
  const std::vector<std::string>& cgroup_dirs() const { return cgroup_->dirs(); }

 private:
  friend class Sandbox;
  SandboxedTask() = default;
  class Sandbox* owner_ = nullptr;
  TaskIdentity id_;
  std::string task_dir_;  // init writes the program's wait status to <task_dir_>/exit_status
  std::string work_dir_;
  bool own_network_ = false;
  std::string netns_path_;
  std::string resolv_conf_;
  std::unique_ptr<TaskCgroup> cgroup_;
  bool released_ = false;
};

class Sandbox {
 public:
  // REQUIRES: options.enabled. `data_dir` is hidden from tasks (each sees only its work dir).
  static Result<std::shared_ptr<Sandbox>> Create(SandboxOptions options,
                                                 const std::string& data_dir);
  // Capabilities of an agent without a sandbox (sandbox.enabled: false).
  static std::vector<Capability> DisabledCapabilities();
  // Removes the (then empty) <cgroup_parent> directories; busy ones are left alone.
  ~Sandbox();

  Result<std::unique_ptr<SandboxedTask>> Prepare(const SandboxRequest& request);
  // The sandbox of a task a previous agent process launched, running as `uid`, for a restarted
  // agent that re-adopts it (its uid reserved again, its cgroup found, nothing created); released
  // like a prepared one. Errors name what is gone or taken.
  Result<std::unique_ptr<SandboxedTask>> Adopt(const SandboxRequest& request, uid_t uid);
  std::vector<Capability> Capabilities() const;
  const CgroupLayout& layout() const { return layout_; }
  const SandboxOptions& options() const { return options_; }
  // The node's one map of task uids: containers (agent/oci/container.h) take theirs from it too,
  // so no two tasks ever share a uid.
  const std::shared_ptr<UidMap>& uids() const { return uids_; }

 private:
  friend class SandboxedTask;
  Sandbox(SandboxOptions options, std::string data_dir);

  SandboxOptions options_;
  std::string data_dir_;
  std::string empty_file_;
  std::vector<std::string> hide_files_, hide_dirs_;
  CgroupLayout layout_;
  std::shared_ptr<UidMap> uids_;
};

}  // namespace gpupool::agent::sandbox
