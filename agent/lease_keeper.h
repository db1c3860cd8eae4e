// LeaseKeeper: a small watchdog process that binds a node's tasks to its node lease, and holds
// them through an agent restart.
//
// Start() forks the keeper (its own process group, so a signal to the agent's group spares it;
// SIGTERM, SIGINT and SIGHUP ignored). The agent tells it, over a SOCK_SEQPACKET socket, which
// process groups are its tasks (Track/Untrack) and until when its node lease holds plus the stop
// grace (Renew: a CLOCK_MONOTONIC deadline). The keeper SIGKILLs every tracked group
//   - when the deadline passes without a renewal: the agent could not renew its lease, or is
//     stopped (SIGSTOP, a hung machine slice) and cannot act itself;
//   - when the agent goes away before any lease was granted (nothing would bound the tasks); and
//   - when the agent says so (the destructor: an agent that stops its tasks, or a test).
// So the scheduler may start a silent node's tasks elsewhere once the deadline has passed
// (scheduler/node_lease.h), whatever state the agent process is in. See docs/ha.md.
//
// Agent restarts (issue 30): given a socket path (Start(path), `<data_dir>/lease-keeper.sock`),
// the keeper also listens there. When the agent's side closes — the agent died (kill -9, a
// crash) or left its tasks on purpose (Leave(), a SIGTERM with stop_tasks_on_shutdown off) — the
// keeper keeps its groups and its deadline: a restarted agent connects to the same keeper
// (Start(path) finds it), says Reset, and tracks the tasks it re-adopts (task_runner.h); with no
// agent back by the deadline, the keeper kills them and exits. A keeper with nothing to hold
// exits when its agent goes away.
//
// The child runs only async-signal-safe calls (poll, accept, recv, clock_gettime, kill, unlink):
// it is safe to fork from a threaded process. It keeps at most kMaxGroups groups; beyond, Track
// fails (the task still runs, guarded by the agent alone) and says so in the log.
//
// Thread safety: every method is safe from any thread (one datagram per call).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace gpupool::agent {

class LeaseKeeper {
 public:
  static constexpr int kMaxGroups = 8192;

  // `socket_path` empty: a keeper bound to this process alone (its end of file kills). Else the
  // keeper listening there is joined if one runs (`attached()`), or a new one is started.
  static Result<std::shared_ptr<LeaseKeeper>> Start(const std::string& socket_path = "");
  // Unless Leave() was called: the keeper kills whatever is still tracked and exits (reaped when
  // this process started it).
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  bool Track(pid_t pgid);
  void Untrack(pid_t pgid);
  // Kill every tracked group at this CLOCK_MONOTONIC time (µs) unless renewed again.
  void Renew(int64_t kill_at_monotonic_us);
  // Forgets every tracked group (kills none): a restarted agent's first word, before it tracks
  // the tasks it re-adopts. The deadline stays.
  void Reset();
  // Closes this side without a word: the keeper holds its groups until the deadline or the next
  // agent (tasks left for re-adoption). Nothing is sent after.
  void Leave();

  pid_t pid() const { return pid_; }
  // True when Start() joined a keeper a previous agent process left running.
  bool attached() const { return !child_; }

  // CLOCK_MONOTONIC now, in µs (the keeper's clock; the agent converts its deadlines to it).
  static int64_t MonotonicNowUs();

 private:
  LeaseKeeper(pid_t pid, int fd, bool child) : pid_(pid), fd_(fd), child_(child) {}
  bool Send(int32_t op, int32_t pgid, int64_t at_us);

  pid_t pid_;
  int fd_;
  bool child_;  // this process forked it (and reaps it)
  bool left_ = false;
};

}  // namespace gpupool::agent
