// Starting a task's process: the one posix_spawn the task runner uses for plain commands and for
// the OCI shim of an image task, and the file-system-safe name of a task attempt.
//
// Thread safety: pure functions (SpawnProcessGroup forks; call it from any thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
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

}  // namespace gpupool::agent
