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
// starts the daemon if needed (waits until it answers a command) and returns the environment the
// task gets: the pipe and log directories, and the client's own limits,
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT — set per client in its
// environment, as NVIDIA documents for MPS clients, never through the daemon's
// `set_default_*` commands (those change the defaults of the *next* server only, so concurrent
// starts raced and a running server's new clients kept its old limits). A daemon that does not
// start or answer is an error naming it; the task must then fail, never run unconfined.
//
// One user per server: a control daemon runs one MPS server at a time, for one uid, and queues a
// client of another uid until that server's clients are all gone (nvidia-cuda-mps-control(1)).
// So the clients of one daemon must share a uid: with the sandbox (each task its own uid) the
// agent runs a daemon per tenant (`per_tenant`, forced on) and the sandbox runs every MPS client
// of a tenant as that tenant's shared uid (sandbox::UidMap::AcquireShared, Serves() below);
// without the sandbox every task runs as the agent's user anyway.
//
// Supervise() (the agent's health poll): a daemon that exited is started again, and its
// (device, tenant) is returned so the agent fails the tasks that used it (UsedBy) with a clear
// reason.
//
// Agent restarts (docs/agent.md, "Agent restarts"): a daemon runs in a process group of its own
// and records "<pid> <start ticks>" in <dir>/daemon.pid. An agent that leaves its tasks running
// (Leave()) leaves their daemons running too; the next agent process re-adopts a daemon (Adopt()
// for a re-adopted client, or Prepare() for a new one) when that pid still names the same process
// and it answers a command, and watches it from then on by pid and start time (it is not its
// child). A daemon that is gone cannot be given back to its clients: Adopt() says so, and the
// restarted agent kills those tasks.
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
  // Whether `spec` is an MPS client (a grant below a whole device's threads).
  static bool Serves(const TaskSpec& spec);
  // A re-adopted client's daemons (a restarted agent): each of `spec`'s shared grants' daemons,
  // re-adopted from the previous agent process; UNAVAILABLE naming one that is gone.
  Status Adopt(const TaskSpec& spec);
  // This agent process leaves its tasks running: the destructor leaves the daemons running too.
  void Leave();
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
    bool adopted = false;     // started by a previous agent process: not our child
    int64_t start_ticks = 0;  // adopted: the process's start time, with pid its name
  };
  // REQUIRES: mu_ held.
  Status StartLocked(Daemon* d);
  // The daemon a previous agent process left in d->dir, if it still runs and answers.
  bool AdoptLocked(Daemon* d);
  // The daemon of `spec`'s grant `g`, created unstarted when new.
  Daemon& DaemonOfLocked(const TaskSpec& spec, const std::string& uuid);
  // Whether d's process has ended (reaped, for a child); `ws` its wait status when known.
  bool EndedLocked(const Daemon& d, int* ws) const;
  Status CommandLocked(const Daemon& d, const std::string& commands, std::string* out) const;
  std::map<std::string, std::string> EnvOf(const Daemon& d) const;
  // The tenant whose daemon serves `spec`'s shared grants; empty: the device's shared daemon.
  std::string DaemonTenant(const TaskSpec& spec) const;

  MpsOptions options_;
  mutable std::mutex mu_;  // guards daemons_ and leaving_
  bool leaving_ = false;
  std::map<std::string, Daemon> daemons_;  // by key: uuid or uuid/tenant
};

}  // namespace gpupool::agent
