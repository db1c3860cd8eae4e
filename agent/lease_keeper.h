// LeaseKeeper: a small watchdog process that binds a node's tasks to its agent and its lease.
//
// Start() forks the keeper (its own process group, so a signal to the agent's group spares it;
// SIGTERM, SIGINT and SIGHUP ignored). The agent tells it, over a SOCK_SEQPACKET socket, which
// process groups are its tasks (Track/Untrack) and until when its node lease holds plus the stop
// grace (Renew: a CLOCK_MONOTONIC deadline). The keeper SIGKILLs every tracked group
//   - when the deadline passes without a renewal: the agent could not renew its lease, or is
//     stopped (SIGSTOP, a hung machine slice) and cannot act itself; and
//   - when the socket reaches end of file: the agent process died (kill -9, crash), then exits.
// So the scheduler may start a silent node's tasks elsewhere once the deadline has passed
// (scheduler/node_lease.h), whatever state the agent process is in. See docs/ha.md.
//
// The child runs only async-signal-safe calls (poll, recv, clock_gettime, kill): it is safe to
// fork from a threaded process. It keeps at most kMaxGroups groups; beyond, Track fails (the
// task still runs, guarded by the agent alone) and says so in the log.
//
// Thread safety: every method is safe from any thread (one datagram per call).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "base/status.h"

namespace gpupool::agent {

class LeaseKeeper {
 public:
  static constexpr int kMaxGroups = 8192;

  static Result<std::shared_ptr<LeaseKeeper>> Start();
  // Closes the socket: the keeper kills whatever is still tracked and exits; reaps it.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  bool Track(pid_t pgid);
  void Untrack(pid_t pgid);
  // Kill every tracked group at this CLOCK_MONOTONIC time (µs) unless renewed again.
  void Renew(int64_t kill_at_monotonic_us);

  pid_t pid() const { return pid_; }

  // CLOCK_MONOTONIC now, in µs (the keeper's clock; the agent converts its deadlines to it).
  static int64_t MonotonicNowUs();

 private:
  LeaseKeeper(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  bool Send(int32_t op, int32_t pgid, int64_t at_us);

  pid_t pid_;
  int fd_;
};

}  // namespace gpupool::agent
