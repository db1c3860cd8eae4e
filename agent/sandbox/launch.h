// Launch: start one task program inside its sandbox.
//
// The agent clones a child into new mount, PID and IPC namespaces. That child becomes the task's
// init (PID 1 of its namespace); as root it
//   1. joins the task's cgroups (writes "0" to each cgroup.procs — before anything else runs),
//   2. makes every mount private, bind-mounts an unreadable empty file over each hidden file (the
//      agent's config with the node token, certificates), puts fresh tmpfs over /tmp, /var/tmp
//      and /dev/shm and over each hidden directory (the agent's data dir: state, logs, other
//      tasks), then binds the task's own work directory back at its path and mounts a /proc that
//      shows only the task's processes;
//   3. forks the task program, which drops to the task's uid/gid (no supplementary groups,
//      no_new_privs), resets signal dispositions, takes stdin from /dev/null and stdout/stderr to
//      the log, chdirs into the work directory and execs;
//   4. waits: reaps orphans, forwards signals to the program, and when the program ends writes
//      its wait status to the status pipe and exits (the kernel then kills whatever is left in
//      the namespace).
// PID 1 of a namespace ignores signals it has no handler for, which is why the program is not
// init itself: a SIGTERM to the task's process group still ends it as it would outside.
//
// Every step that fails is reported back through a pipe (step, path, errno) before anything of
// the tenant runs; Launch() then returns that error and the child is gone: a task never runs
// half-confined. The child only makes raw system calls after the clone (the agent is
// multi-threaded; no allocation or locks there).
//
// Thread safety: Launch() may be called from any thread; callers serialize launches if they need
// a stable fd table (the task runner does).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent::sandbox {

// Where a GPU slice's ledger directory appears in a sandboxed task's work dir.
inline constexpr const char* kLedgerMount = ".gpupool";

// A sandboxed task's work dir (its cwd and $HOME) inside its task dir.
inline std::string WorkDirOf(const std::string& task_dir) { return task_dir + "/work"; }

struct LaunchPlan {
  std::string exec_path;  // absolute path of the program (resolved by the caller)
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "K=V"
  std::string work_dir;          // the task's cwd, owned by uid
  // A GPU slice's ledger directory (root-owned), bound at <work_dir>/<kLedgerMount>, a mount
  // point that must exist; empty: none.
  std::string ledger_dir;
  std::vector<std::string> hide_files;
  std::vector<std::string> hide_dirs;
  std::vector<std::string> private_tmp;  // tmpfs (1777) over each that exists
  std::string empty_file;                // mode 0000, bound over hide_files
  std::vector<int> cgroup_fds;           // open cgroup.procs descriptors
  // Network: join the namespace at `netns_path` (a task's isolated network), else a namespace of
  // the task's own with loopback up (`own_network`), else the node's.
  bool own_network = false;
  std::string netns_path;
  std::string resolv_conf;  // bound read-only over /etc/resolv.conf (an isolated network's)
  uid_t uid = 0;
  gid_t gid = 0;
  int log_fd = -1;
  // Where init also writes the program's wait status (FormatWaitStatus), for an agent process
  // that is not init's parent (a restarted agent re-adopting the task); empty: the pipe only.
  std::string status_file;
};

struct Launched {
  pid_t pid = 0;       // the task's init, leader of its process group
  int status_fd = -1;  // non-blocking; yields the program's wait status (an int) once it ended
};

// Errors: NotFound / PermissionDenied for an exec failure ("exec '/bin/x': No such file or
// directory"); FailedPrecondition naming the sandbox step otherwise.
Result<Launched> Launch(const LaunchPlan& plan);

// "<decimal wait status>\n" into `buf` (at least 12 bytes); returns its length. Async-signal-safe:
// the status file's format, shared with plain commands' recorder (agent/task_spawn.h).
size_t FormatWaitStatus(int wait_status, char* buf);

// Reads the program's wait status from a status pipe; false when init died without writing one.
bool ReadExitStatus(int status_fd, int* wait_status);

}  // namespace gpupool::agent::sandbox
