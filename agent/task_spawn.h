// Starting a task's process: the one posix_spawn the task runner uses for plain commands and for
// the OCI shim of an image task, and the file-system-safe name of a task attempt.
//
// Thread safety: pure functions (SpawnProcessGroup forks; call it from any thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent {

// `id` with every character other than [A-Za-z0-9._-] replaced by '_' and never starting with
// '.': a directory, cgroup or container name.
std::string SafeTaskName(const std::string& id);

// The name of a node's task attempt, unique on the node: its cgroup, its slice ledger's key and
// its container's id ("<owner>_<task>.<attempt>", made safe).
std::string AttemptName(const std::string& owner, const std::string& task_id, int32_t attempt);

// Creates <data_dir>/tasks/<task>.<attempt> (SafeTaskName) and returns it; INTERNAL naming the
// task and the directory when it cannot.
Result<std::string> CreateTaskDir(const std::string& data_dir, const std::string& task_id,
                                  int32_t attempt);

// Spawns argv[0] (searched on PATH of the caller when it has no '/') in a new process group
// whose id is its pid, with the signal mask cleared and every signal at its default, in `dir`,
// stdin from /dev/null, stdout and stderr on `log_fd`, no other descriptor, environment `env`
// ("K=V"). Returns the pid, or an error naming the program and errno's text.
Result<pid_t> SpawnProcessGroup(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const std::string& dir,
                                int log_fd);

// A plain command whose end a later agent process can still learn (issue 30: tasks outlive an
// agent restart). Like SpawnProcessGroup, but the group's leader is a small recorder forked from
// the caller (no exec; async-signal-safe calls only, so it is safe from a threaded agent) that
// starts `exec_path` (absolute, or relative to `dir`) as its child, ignores SIGTERM, SIGINT,
// SIGHUP and SIGQUIT sent to the group (the program gets them), waits for the program, writes its
// wait status to `status_path` as "<decimal>\n", and exits with its exit code (128 + signal when a
// signal ended it). A SIGKILL to the group ends the recorder too: then no status is written.
// An exec or chdir that fails returns NotFound / PermissionDenied naming the program and errno's
// text, and nothing is left running.
Result<pid_t> SpawnRecordedGroup(const std::string& exec_path, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& dir,
                                 int log_fd, const std::string& status_path);

// The wait status a recorder wrote to `status_path`; nullopt when there is none (the recorder was
// killed, or the task is not a recorded one).
std::optional<int> ReadRecordedStatus(const std::string& status_path);

}  // namespace gpupool::agent
