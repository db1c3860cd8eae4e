// watchdog.h — the agent's check on one task's GPU memory, for what the interposer cannot stop
// in-process (a process started without it, an entry point reached around it, a forged ledger
// connection). Every Tick() reconciles the driver's per-process memory (through a
// ProcessMemorySource, NVML on a GPU host) with the task's ledger:
//   - a process the ledger knows (it connected through the interposer) is charged what the
//     driver holds for it beyond its reservations (`reconcile`: its contexts and module code,
//     which no allocation call names); that charge counts against the grant;
//   - a process the ledger does not know holding device memory (more than `slack_bytes`, the
//     driver's rounding) bypassed the interposer: it is killed;
//   - a task holding more than its grant (plus slack) in total: every process of it holding
//     device memory is killed.
// An honest process never trips either: it reserves before the driver allocates and releases
// after the driver frees. To rule out a race between the two readings, the ledger is read
// before and after the driver and the larger charge is used, and a process is killed only when
// found over on `strikes` consecutive ticks. With the agent ticking every 200 ms and 2 strikes,
// a bypass holds memory for at most ~0.6 s.
// Thread safety: one caller at a time.
#ifndef GPUPOOL_AGENT_INTERPOSER_WATCHDOG_WATCHDOG_H_
#define GPUPOOL_AGENT_INTERPOSER_WATCHDOG_WATCHDOG_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/interposer/ledger/ledger_server.h"
#include "agent/interposer/watchdog/process_memory.h"

namespace gpupool::watchdog {

struct Options {
  uint64_t vram_grant = 0;
  uint64_t slack_bytes = 0;
  int strikes = 2;
  std::function<bool(pid_t)> in_task;     // whether a pid belongs to the task
  std::function<ledger::Usage()> ledger;  // the task ledger's snapshot
  // Charges a known process its driver memory (LedgerServer::ReconcileDriverMemory); false for
  // a process the ledger does not know. Unset: every excess is a bypass.
  std::function<bool(pid_t, uint64_t)> reconcile;
  std::function<void(pid_t)> kill;  // default: SIGKILL
};

struct Verdict {
  pid_t pid;
  uint64_t gpu_bytes;
  uint64_t ledger_bytes;
  std::string reason;  // for people: what was seen
};

class Watchdog {
 public:
  Watchdog(ProcessMemorySource* source, Options options);
  // One reconciliation. Returns the processes killed now; false in `*ok` when the source
  // could not be read (nothing is killed on a failed read).
  std::vector<Verdict> Tick(bool* ok = nullptr, std::string* error = nullptr);

 private:
  ProcessMemorySource* source_;
  Options options_;
  std::map<pid_t, int> strikes_;
  int task_strikes_ = 0;
};

// Whether `pid` descends from `root` (or is it), following /proc/<pid>/stat's parent links.
bool IsDescendant(pid_t pid, pid_t root);

}  // namespace gpupool::watchdog

#endif  // GPUPOOL_AGENT_INTERPOSER_WATCHDOG_WATCHDOG_H_
