#include "agent/lease_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"

namespace gpupool::agent {
namespace {

enum Op : int32_t { kTrack = 1, kUntrack = 2, kRenew = 3, kReset = 4, kShutdown = 5 };

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

// The keeper's descriptors after the fork.
constexpr int kAgentFd = 3;   // the agent that started it
constexpr int kListenFd = 4;  // the rendezvous socket (absent without a path)

// Where the keeper listens; filled before the fork (the child must not allocate).
char g_socket_path[sizeof(sockaddr_un::sun_path)];

// A connection from a later agent process of the same user (the socket sits in the agent's
// private data dir; the check is defence in depth). Returns -1 when none is waiting.
int AcceptAgent(int listen_fd) {
  for (;;) {
    const int c = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0 && errno == EINTR) continue;
    if (c < 0) return -1;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid()) return c;
    close(c);
  }
}

// The keeper's whole life. Async-signal-safe calls only, no allocation: it runs in the child of
// a fork from a threaded process.
[[noreturn]] void KeeperMain(int agent_fd, int listen_fd) {
  static pid_t groups[LeaseKeeper::kMaxGroups];
  int count = 0;
  int64_t kill_at = 0;  // 0: no lease yet
  bool fired = false;
  auto kill_all = [&] {
    for (int i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
    count = 0;
  };
  auto leave = [&](int code) {
    if (listen_fd >= 0) unlink(g_socket_path);
    _exit(code);
  };
  for (;;) {
    int timeout_ms = -1;
    if (kill_at > 0 && !fired) {
      const int64_t left = kill_at - NowUs();
      timeout_ms = left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
    }
    pollfd p[2] = {{agent_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
    const int r = poll(p, 2, timeout_ms);
    if (r < 0 && errno != EINTR) {
      kill_all();
      leave(1);
    }
    // A new agent first: it replaces the one before (which is gone, or will find its socket
    // closed).
    if (r > 0 && (p[1].revents & POLLIN)) {
      const int c = AcceptAgent(listen_fd);
      if (c >= 0) {
        if (agent_fd >= 0) close(agent_fd);
        agent_fd = c;
        p[0].revents = 0;
      }
    }
    if (r > 0 && agent_fd >= 0 && p[0].revents != 0) {
      for (;;) {
        Msg m;
        const ssize_t n = recv(agent_fd, &m, sizeof(m), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
          // The agent is gone. Its tasks stay only where a lease bounds them and a later agent
          // can find them; one already waiting takes over at once.
          close(agent_fd);
          agent_fd = listen_fd >= 0 ? AcceptAgent(listen_fd) : -1;
          if (agent_fd >= 0) break;
          if (listen_fd < 0 || kill_at == 0 || fired) kill_all();
          if (count == 0) leave(n == 0 ? 0 : 1);
          break;
        }
        if (n < 0) {
          if (errno == EINTR) continue;
          break;  // EAGAIN: all read
        }
        if (n != static_cast<ssize_t>(sizeof(m))) continue;
        if (m.op == kTrack && m.pgid > 1) {
          bool known = false;
          for (int i = 0; i < count && !known; ++i) known = groups[i] == m.pgid;
          if (!known && count < LeaseKeeper::kMaxGroups) groups[count++] = m.pgid;
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
        } else if (m.op == kReset) {
          count = 0;
        } else if (m.op == kShutdown) {
          kill_all();
          leave(0);
        }
      }
    }
    if (kill_at > 0 && !fired && NowUs() >= kill_at) {
      kill_all();
      fired = true;
    }
    // Nothing left to hold and nobody to hold it for.
    if (agent_fd < 0 && count == 0) leave(0);
  }
}

// Connects to a keeper listening at `path`; -1 when none does.
int ConnectKeeper(const std::string& path, pid_t* pid) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid()) {
    close(fd);
    return -1;
  }
  *pid = cred.pid;
  return fd;
}

// A socket bound at `path` (a stale one from a dead keeper is replaced), non-blocking.
Result<int> Listen(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Internal("lease keeper: socket: " + std::string(std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  unlink(path.c_str());
  const mode_t old = umask(077);
  const int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  // listen() is the keeper's own (after the fork): a connecting agent's SO_PEERCRED then names
  // the keeper, not the agent process that created the socket.
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return Status::Internal("lease keeper: cannot listen at " + path + ": " + std::strerror(err));
  }
  return fd;
}

}  // namespace

int64_t LeaseKeeper::MonotonicNowUs() { return NowUs(); }

Result<std::shared_ptr<LeaseKeeper>> LeaseKeeper::Start(const std::string& socket_path) {
  if (socket_path.size() >= sizeof(g_socket_path)) {
    return Status::InvalidArgument("lease keeper: socket path " + socket_path + " is longer than " +
                                   std::to_string(sizeof(g_socket_path) - 1) +
                                   " bytes; choose a shorter data_dir");
  }
  int listen_fd = -1;
  if (!socket_path.empty()) {
    pid_t pid = 0;
    const int fd = ConnectKeeper(socket_path, &pid);
    if (fd >= 0) {
      LogInfo("agent.lease", "joined the lease keeper of a previous agent process",
              {{"pid", std::to_string(pid)}, {"socket", socket_path}});
      return std::shared_ptr<LeaseKeeper>(new LeaseKeeper(pid, fd, false));
    }
    GPUPOOL_ASSIGN_OR_RETURN(listen_fd, Listen(socket_path));
    std::memcpy(g_socket_path, socket_path.c_str(), socket_path.size() + 1);
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    const int err = errno;
    if (listen_fd >= 0) close(listen_fd);
    return Status::Internal(std::string("lease keeper: socketpair: ") + std::strerror(err));
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
    if (listen_fd >= 0) close(listen_fd);
    return Status::Internal(std::string("lease keeper: fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // Own group, and no inherited descriptors but its end of the socket and the listener.
    setpgid(0, 0);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_NAME, "gpupool-lease", 0, 0, 0);
    // Move both out of the way of 3 and 4 first, then into place.
    const int agent = fcntl(sv[0], F_DUPFD, 10);
    const int listener = listen_fd >= 0 ? fcntl(listen_fd, F_DUPFD, 10) : -1;
    dup2(agent, kAgentFd);
    if (listener >= 0) {
      dup2(listener, kListenFd);
      if (listen(kListenFd, 4) != 0) _exit(1);
    }
    close_range(listener >= 0 ? kListenFd + 1 : kAgentFd + 1, ~0U, 0);
    KeeperMain(kAgentFd, listener >= 0 ? kListenFd : -1);
  }
  // Both sides set the group (the classic job-control idiom), so when Start returns the keeper
  // has left the agent's group whichever of the two ran first; EACCES after the child's exec-free
  // setpgid or ESRCH are harmless.
  setpgid(pid, pid);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  close(sv[0]);
  if (listen_fd >= 0) close(listen_fd);
  LogInfo("agent.lease", "lease keeper started",
          {{"pid", std::to_string(pid)}, {"socket", socket_path}});
  return std::shared_ptr<LeaseKeeper>(new LeaseKeeper(pid, sv[1], true));
}

LeaseKeeper::~LeaseKeeper() {
  if (left_) return;
  Send(kShutdown, 0, 0);
  close(fd_);
  if (!child_) return;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void LeaseKeeper::Leave() {
  if (left_) return;
  left_ = true;
  close(fd_);
  LogInfo("agent.lease", "left the lease keeper holding the tasks for the next agent process",
          {{"pid", std::to_string(pid_)}});
}

bool LeaseKeeper::Send(int32_t op, int32_t pgid, int64_t at_us) {
  if (left_) return false;
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
void LeaseKeeper::Reset() { Send(kReset, 0, 0); }

}  // namespace gpupool::agent
