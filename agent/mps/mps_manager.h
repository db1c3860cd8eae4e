// MpsManager: the agent runs and supervises NVIDIA MPS control daemons, so that fractional and
// time-sliced grants are enforced by MPS instead of being mere environment hints.
//
// One control daemon per GPU, or per tenant per GPU where the task's pool asks for fault isolation
// between tenants (StartTask.mps_tenant_isolation, from Pool.mps_tenant_isolation) or the agent
// forces it for every task (`mps.isolation: tenant`): a tenant's fault — an MPS server crash
// takes its clients down — then never reaches another tenant's tasks. A daemon is `<control> -f`
// (foreground, so the agent is its parent and sees it exit) with CUDA_VISIBLE_DEVICES=<uuid>,
// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY under `mps.dir`/<key>/.
//
// Prepare(spec), before a task whose grant shares a device (thread_percentage < 100) starts:
// starts the daemon if needed (waits until it answers a command), then sends the client's limits
// through the control interface — `set_default_active_thread_percentage <pct>` and
// `set_default_device_pinned_mem_limit 0 <MiB>M` — and returns the environment the task gets
// (the pipe and log directories, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). The defaults apply to the MPS server the control daemon
// starts for the task's uid on its first CUDA call; with the sandbox every task has a uid of its
// own, so every task gets a server with its own limits (task starts are serialized, so the
// defaults cannot be overwritten between Prepare and the server's start by another Prepare of
// the same daemon… except by a task of the same uid, which has the same limits). A daemon that
// does not start or answer is an error naming it; the task must then fail, never run
// unconfined.
//
// Supervise() (the agent's health poll): a daemon that exited is started again, and its
// (device, tenant) is returned so the agent fails the tasks that used it (UsedBy) with a clear
// reason.
//
// Thread safety: all public methods are safe from any thread (one mutex).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent {

struct TaskSpec;

struct MpsOptions {
  bool enabled = false;
  std::string control = "nvidia-cuda-mps-control";  // path or name on PATH
  std::string dir = "/run/gpupool-mps";             // pipe and log directories live here
  bool per_tenant = false;  // isolation: tenant — every task, whatever its pool asks
  int64_t start_timeout_ms = 10'000;
};

struct MpsDaemonState {
  std::string uuid;
  std::string tenant;  // empty unless per tenant
  pid_t pid = 0;
  bool up = false;
  int64_t restarts = 0;
};

struct MpsFailure {
  std::string uuid;
  std::string tenant;  // empty: every tenant's tasks on the device
  std::string reason;
};

class MpsManager {
 public:
  explicit MpsManager(MpsOptions options);
  ~MpsManager();  // quits every daemon
  MpsManager(const MpsManager&) = delete;
  MpsManager& operator=(const MpsManager&) = delete;

  // The environment for the task's shared grants (empty when it has none); see above.
  Result<std::map<std::string, std::string>> Prepare(const TaskSpec& spec);
  std::vector<MpsFailure> Supervise();
  // Whether `spec`'s task was a client of the daemon that `failure` names: a shared grant on its
  // device, through that daemon (the tenant's own, or the device's shared one).
  bool UsedBy(const TaskSpec& spec, const MpsFailure& failure) const;
  std::vector<MpsDaemonState> States() const;
  const MpsOptions& options() const { return options_; }
  // The capability line for Register.
  std::string Describe() const;

 private:
  struct Daemon {
    std::string uuid, tenant, dir;
    pid_t pid = 0;
    int64_t restarts = 0;
  };
  // REQUIRES: mu_ held.
  Status StartLocked(Daemon* d);
  Status CommandLocked(const Daemon& d, const std::string& commands, std::string* out) const;
  std::map<std::string, std::string> EnvOf(const Daemon& d) const;
  // The tenant whose daemon serves `spec`'s shared grants; empty: the device's shared daemon.
  std::string DaemonTenant(const TaskSpec& spec) const;

  MpsOptions options_;
  mutable std::mutex mu_;                  // guards daemons_
  std::map<std::string, Daemon> daemons_;  // by key: uuid or uuid/tenant
};

}  // namespace gpupool::agent
