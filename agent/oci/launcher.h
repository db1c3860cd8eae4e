// Launcher: runs a task's bundle under runc, through a small shim, and reports how it ended.
//
// The shim (gpupool-oci-shim, shim_main.cc) is the process the agent supervises for a
// container task, the way containerd-shim or conmon is for theirs. It
//   1. becomes a child subreaper, so the container's init is re-parented to it and it can
//      collect the init's exit status;
//   2. runs `runc create --bundle B --pid-file B/init.pid ID` (the container inherits the shim's
//      stdout and stderr: the task's log), then `runc start ID`;
//   3. forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the init (note: an init
//      that installed no handler ignores them — Stop() escalates to SIGKILL after the grace);
//   4. when the init has exited, reads the container's cgroups for OOM kills (memory.events
//      `oom_kill` on v2, memory.oom_control `oom_kill` on v1), peak memory and CPU time before
//      `runc delete --force ID` removes them;
//   4a. once `runc start` returned, creates <bundle>/started (kStartedMarker): the container's
//      program runs, which is when the agent reports the task RUNNING;
//   5. writes the result file (JSON: exit_code, signal, oom_kills, cpu_usec, peak_memory_bytes,
//      reason) and exits with the
//      container's exit code (128 + signal when it was killed; 125 when runc could not start it).
// A watchdog child of the shim, in a session of its own, holds the read end of a pipe only the
// shim writes to; when the shim is gone — exited, or SIGKILLed with the task's process group by
// the task runner's stop escalation — it runs `runc delete --force ID`. So the task runner's
// usual stop (SIGTERM to the group, SIGKILL after the grace) ends a container too, and a
// container never outlives its shim. DeleteAll() clears containers that no shim ever ran
// (a crash between `runc create` and the shim's start) when a restarted agent cleans up.
//
// Thread safety: all methods may be called from any thread; one container id at a time per
// call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent::oci {

// Created in the bundle by the shim once the container's program was started.
inline constexpr char kStartedMarker[] = "started";

struct LauncherOptions {
  std::string runc = "runc";
  std::string state_root = "/run/gpupool/runc";  // runc --root: its container state
  std::string shim;                              // path of gpupool-oci-shim
};

struct ContainerExit {
  int exit_code = -1;  // the init's exit status; -1 when killed by a signal
  int signal = 0;
  int64_t oom_kills = 0;  // OOM kills in the container's memory cgroup
  // What its groups used (sandbox::ReadCgroupUsage): CPU time and peak memory, for the usage a
  // task reports like a sandboxed one's.
  int64_t cpu_usec = 0;
  int64_t peak_memory_bytes = 0;
  bool oom_killed() const { return oom_kills > 0; }
  std::string reason;  // "exit 3", "killed by signal 9 (OOM: memory limit)", "runc create: …"
  // What the shim exits with: exit_code, 128 + signal, or 125 when the runtime failed.
  int shim_exit_code() const;
};

class Launcher {
 public:
  explicit Launcher(LauncherOptions options) : options_(std::move(options)) {}

  // The shim's argv for `bundle` (holding config.json) and container `id`; its result goes to
  // <bundle>/result.json.
  std::vector<std::string> ShimArgv(const std::string& bundle, const std::string& id) const;

  // Starts the shim with stdout+stderr on `log_fd`; returns its pid (the caller's child).
  Result<pid_t> Start(const std::string& bundle, const std::string& id, int log_fd) const;
  // Waits for a shim from Start() and reads its result.
  Result<ContainerExit> Wait(pid_t shim, const std::string& bundle) const;
  // Start + Wait.
  Result<ContainerExit> Run(const std::string& bundle, const std::string& id, int log_fd) const;

  // The container init's host pid (runc state), or NotFound.
  Result<pid_t> InitPid(const std::string& id) const;
  // Sends `signal` to the container's init (runc kill).
  Status Kill(const std::string& id, int signal) const;
  // SIGTERM, then SIGKILL once `grace_ms` passed and the container still runs.
  Status Stop(const std::string& id, int64_t grace_ms) const;
  // Kills what is left and removes the container (runc delete --force); OK when unknown.
  Status Delete(const std::string& id) const;
  // Deletes every container under state_root whose id starts with `prefix`; returns how many.
  // Containers named in `keep` (re-adopted by a restarted agent) stay.
  Result<int> DeleteAll(const std::string& prefix, const std::vector<std::string>& keep = {}) const;

  static Result<ContainerExit> ReadResult(const std::string& path);

 private:
  LauncherOptions options_;
};

// The shim's main (shim_main.cc calls it): --runc, --root, --bundle, --id.
int ShimMain(int argc, char** argv);

}  // namespace gpupool::agent::oci
