// TaskRecord: the `state` file of a task attempt (<data_dir>/tasks/<task>.<attempt>/state), the
// agent's only memory of a task that outlives the agent process.
//
// Written when the task's process starts and appended to when it ends. A restarted agent reads
// it to re-adopt a task its previous process left running, to report one that ended while no
// agent watched, or to kill one it cannot re-adopt (TaskRunner::Recover, docs/agent.md). It
// holds what those need — ids, the grant, the limits, the leader's pid and start time, the
// sandbox's uid and cgroups — and never the task's argv or environment (secrets live there).
//
// Format: "key=value" lines; a value never holds a newline (FormatTaskRecord replaces them). Keys
// a reader does not know are skipped, so older and newer agents read each other's files.
//
// Thread safety: pure functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/task_runner.h"
#include "base/status.h"

namespace gpupool::agent {

// How the task's leader was started; a restarted agent re-adopts the kinds it can rebuild.
enum class TaskKind { kPlain, kRecorded, kSandboxed, kContainer };
const char* TaskKindName(TaskKind kind);

struct TaskRecord {
  TaskSpec spec;  // argv, env, registry credentials and device files are not kept
  TaskKind kind = TaskKind::kPlain;
  pid_t pid = 0;  // the group leader (its pgid)
  // The leader's start time (clock ticks after boot, /proc/<pid>/stat): with the pid, it names
  // the process even after the pid was reused.
  int64_t leader_start = 0;
  int64_t started_unix_ms = 0;  // when the program started (max runtime counts from here)
  uid_t uid = 0;                // sandboxed / container: the task's uid
  std::vector<std::string> cgroups;
  std::string container;        // container tasks: the runtime's id
  std::string image_digest;     // … its image's manifest digest (empty: a plain command)
  bool rootfs_overlay = false;  // … its root file system is an overlay at <task dir>/rootfs
  std::string slice_key;        // a GPU slice's ledger ran for it
  bool mps = false;             // its grant was served by an MPS control daemon the agent ran
  bool isolated_network = false;
  int network_slot = -1;                      // isolated: its network's slot (net::TaskNetworks)
  std::vector<net::PublishedPort> published;  // … its declared ports and the node's they are on
  // Once it ended.
  std::optional<TaskPhase> phase;  // unset while it runs (or was never seen to end)
  int32_t exit_code = 0;
  int32_t signal = 0;
  bool oom = false;
  bool orphan_killed = false;  // a restarted agent killed it: no outcome to report
  std::string reason;
};

// The lines written when the task starts.
std::string FormatTaskRecord(const TaskRecord& record);
// The lines appended when it ends (phase, exit code, signal, oom, reason).
std::string FormatTaskOutcome(TaskPhase phase, int32_t exit_code, int32_t signal, bool oom,
                              const std::string& reason);

// Reads <dir>/state. NotFound without one; InvalidArgument naming the file when it lacks the
// task id or the pid.
Result<TaskRecord> ReadTaskRecord(const std::string& dir);

// The start time of process `pid` (field 22 of /proc/<pid>/stat), 0 when it does not exist.
int64_t ProcessStartTicks(pid_t pid);

}  // namespace gpupool::agent
