#include "agent/lease_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"

namespace gpupool::agent {
namespace {

enum Op : int32_t { kTrack = 1, kUntrack = 2, kRenew = 3 };

struct Msg {
  int32_t op = 0;
  int32_t pgid = 0;
  int64_t at_us = 0;
};

int64_t NowUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// The keeper's whole life. Async-signal-safe calls only, no allocation: it runs in the child of
// a fork from a threaded process.
[[noreturn]] void KeeperMain(int fd) {
  static pid_t groups[LeaseKeeper::kMaxGroups];
  int count = 0;
  int64_t kill_at = 0;  // 0: no lease yet
  bool fired = false;
  auto kill_all = [&] {
    for (int i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
    count = 0;
  };
  for (;;) {
    int timeout_ms = -1;
    if (kill_at > 0 && !fired) {
      const int64_t left = kill_at - NowUs();
      timeout_ms = left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
    }
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) {
      kill_all();
      _exit(1);
    }
    if (r > 0) {
      for (;;) {
        Msg m;
        const ssize_t n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
        if (n == 0) {  // the agent is gone: its tasks go with it
          kill_all();
          _exit(0);
        }
        if (n < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          kill_all();
          _exit(1);
        }
        if (n != static_cast<ssize_t>(sizeof(m))) continue;
        if (m.op == kTrack && m.pgid > 1 && count < LeaseKeeper::kMaxGroups) {
          groups[count++] = m.pgid;
          // Tracked after the lease lapsed (should not happen: the agent starts nothing then).
          if (fired) kill(-m.pgid, SIGKILL);
        } else if (m.op == kUntrack) {
          for (int i = 0; i < count; ++i) {
            if (groups[i] == m.pgid) {
              groups[i] = groups[--count];
              break;
            }
          }
        } else if (m.op == kRenew) {
          kill_at = m.at_us;
          fired = false;
        }
      }
    }
    if (kill_at > 0 && !fired && NowUs() >= kill_at) {
      kill_all();
      fired = true;
    }
  }
}

}  // namespace

int64_t LeaseKeeper::MonotonicNowUs() { return NowUs(); }

Result<std::shared_ptr<LeaseKeeper>> LeaseKeeper::Start() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Internal(std::string("lease keeper: socketpair: ") + std::strerror(errno));
  }
  // Every signal stays blocked across the fork, so none can reach the keeper before it ignores
  // it: a SIGTERM meant for the agent's group that arrives in that window stays pending and is
  // discarded when the keeper sets SIG_IGN (POSIX: setting SIG_IGN discards a pending signal).
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    close(sv[0]);
    close(sv[1]);
    return Status::Internal(std::string("lease keeper: fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Own group and no inherited descriptors but its end of the socket.
    setpgid(0, 0);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_NAME, "gpupool-lease", 0, 0, 0);
    if (sv[0] != 3) {
      dup2(sv[0], 3);
    } else {
      fcntl(3, F_SETFD, 0);
    }
    close_range(4, ~0U, 0);
    KeeperMain(3);
  }
  // Both sides set the group (the classic job-control idiom), so when Start returns the keeper
  // has left the agent's group whichever of the two ran first; EACCES after the child's exec-free
  // setpgid or ESRCH are harmless.
  setpgid(pid, pid);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  close(sv[0]);
  LogInfo("agent.lease", "lease keeper started", {{"pid", std::to_string(pid)}});
  return std::shared_ptr<LeaseKeeper>(new LeaseKeeper(pid, sv[1]));
}

LeaseKeeper::~LeaseKeeper() {
  close(fd_);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool LeaseKeeper::Send(int32_t op, int32_t pgid, int64_t at_us) {
  Msg m{op, pgid, at_us};
  for (;;) {
    // Never blocks the caller: a keeper that cannot keep up is logged, not waited for.
    const ssize_t n = send(fd_, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof(m))) return true;
    if (n < 0 && errno == EINTR) continue;
    LogWarn("agent.lease", "lease keeper unreachable", {{"error", std::strerror(errno)}});
    return false;
  }
}

bool LeaseKeeper::Track(pid_t pgid) { return Send(kTrack, pgid, 0); }
void LeaseKeeper::Untrack(pid_t pgid) { Send(kUntrack, pgid, 0); }
void LeaseKeeper::Renew(int64_t kill_at_monotonic_us) { Send(kRenew, 0, kill_at_monotonic_us); }

}  // namespace gpupool::agent
