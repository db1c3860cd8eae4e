#include "agent/sandbox/launch.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gpupool::agent::sandbox {
namespace {

enum Step : int32_t {
  kJoinCgroup = 1,
  kMountPrivate,
  kHideFile,
  kPrivateTmp,
  kHideDir,
  kMkdirWork,
  kBindWork,
  kBindLedger,
  kProc,
  kNetwork,
  kLoopback,
  kResolvConf,
  kFork,
  kSetgroups,
  kSetgid,
  kSetuid,
  kNoNewPrivs,
  kChdir,
  kStdio,
  kExec,
};

struct SetupError {
  int32_t step = 0;
  int32_t err = 0;
  int32_t index = 0;
};

// Everything the child needs, prepared before the clone: plain pointers, no allocation after.
struct ChildArgs {
  const LaunchPlan* plan;
  std::vector<const char*> argv, envp, work_prefixes;
  int work_fd = -1;          // the descriptor number work_fd_path names
  std::string work_fd_path;  // /proc/self/fd/N of an O_PATH descriptor of the work dir
  int ledger_fd = -1;        // likewise for the GPU slice's ledger directory (optional)
  int netns_fd = -1;         // the isolated network to join (optional)
  std::string ledger_fd_path;
  std::string ledger_mount;  // <work dir>/.gpupool
  int err_fd = -1;           // write end, O_CLOEXEC
  int status_fd = -1;        // write end
  int status_file_fd = -1;   // LaunchPlan::status_file, open for writing (optional)
};

[[noreturn]] void Fail(int err_fd, Step step, int err, int index = 0) {
  SetupError e{step, err, index};
  [[maybe_unused]] ssize_t n = write(err_fd, &e, sizeof(e));
  _exit(126);
}

long RawClone(unsigned long flags) {
  return syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, 0);
}

[[noreturn]] void RunProgram(const ChildArgs& a) {
  const LaunchPlan& p = *a.plan;
  // Give the program back the ordinary OOM score init gave up (best effort, as there).
  const int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    [[maybe_unused]] ssize_t n = write(oom, "0", 1);
    close(oom);
  }
  // Raw system calls: glibc's setuid family would try to reach the agent's other threads,
  // which do not exist in this child.
  if (syscall(SYS_setgroups, 0, nullptr) != 0) Fail(a.err_fd, kSetgroups, errno);
  if (syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) Fail(a.err_fd, kSetgid, errno);
  if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) Fail(a.err_fd, kSetuid, errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(a.err_fd, kNoNewPrivs, errno);
  if (chdir(p.work_dir.c_str()) != 0) Fail(a.err_fd, kChdir, errno);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(p.log_fd, 1) < 0 || dup2(p.log_fd, 2) < 0) {
    Fail(a.err_fd, kStdio, errno);
  }
  // Nothing of the agent's survives the exec; the error pipe closes on success.
  syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(p.exec_path.c_str(), const_cast<char* const*>(a.argv.data()),
         const_cast<char* const*>(a.envp.data()));
  Fail(a.err_fd, kExec, errno);
}

[[noreturn]] void RunInit(const ChildArgs& a) {
  const LaunchPlan& p = *a.plan;
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  setpgid(0, 0);
  for (size_t i = 0; i < p.cgroup_fds.size(); ++i) {
    if (write(p.cgroup_fds[i], "0", 1) != 1)
      Fail(a.err_fd, kJoinCgroup, errno, static_cast<int>(i));
  }
  // The task's memory limit should kill the program, not its init. Best effort: a container
  // without CAP_SYS_RESOURCE may refuse, and the kernel prefers the bigger program anyway.
  const int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    [[maybe_unused]] ssize_t n = write(oom, "-1000", 5);
    close(oom);
  }
  if (a.netns_fd >= 0) {
    // The task's isolated network, prepared by the agent (agent/net/task_network.h).
    if (setns(a.netns_fd, CLONE_NEWNET) != 0) Fail(a.err_fd, kNetwork, errno);
    close(a.netns_fd);
  } else if (p.own_network) {
    // A namespace of its own (cloned so): loopback only, and up, for the task's own processes.
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, "lo", 3);
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) Fail(a.err_fd, kLoopback, errno);
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) Fail(a.err_fd, kLoopback, errno);
    close(s);
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    Fail(a.err_fd, kMountPrivate, errno);
  }
  // A handle on the work dir in this namespace (the inherited one belongs to the agent's, which
  // a bind mount refuses), put where work_fd_path points, before anything covers it.
  const int work = open(p.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (work < 0 || dup3(work, a.work_fd, O_CLOEXEC) < 0) Fail(a.err_fd, kBindWork, errno);
  if (a.ledger_fd >= 0) {
    const int ledger = open(p.ledger_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (ledger < 0 || dup3(ledger, a.ledger_fd, O_CLOEXEC) < 0) Fail(a.err_fd, kBindLedger, errno);
  }
  for (size_t i = 0; i < p.hide_files.size(); ++i) {
    if (mount(p.empty_file.c_str(), p.hide_files[i].c_str(), nullptr, MS_BIND, nullptr) != 0 &&
        errno != ENOENT) {
      Fail(a.err_fd, kHideFile, errno, static_cast<int>(i));
    }
  }
  struct stat st {};
  // The node's /etc is the task's: a node without /etc/resolv.conf keeps none (nothing is
  // created on the host for a task).
  if (!p.resolv_conf.empty() && stat("/etc/resolv.conf", &st) == 0 &&
      (mount(p.resolv_conf.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0 ||
       mount(nullptr, "/etc/resolv.conf", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) !=
           0)) {
    Fail(a.err_fd, kResolvConf, errno);
  }
  for (size_t i = 0; i < p.private_tmp.size(); ++i) {
    if (stat(p.private_tmp[i].c_str(), &st) != 0) continue;
    if (mount("tmpfs", p.private_tmp[i].c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) {
      Fail(a.err_fd, kPrivateTmp, errno, static_cast<int>(i));
    }
  }
  for (size_t i = 0; i < p.hide_dirs.size(); ++i) {
    if (stat(p.hide_dirs[i].c_str(), &st) != 0) continue;  // already covered by a tmpfs above
    if (mount("tmpfs", p.hide_dirs[i].c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0711") != 0) {
      Fail(a.err_fd, kHideDir, errno, static_cast<int>(i));
    }
  }
  // The path to the work dir now runs through tmpfs: rebuild it (traverse-only) and bind the
  // real directory back.
  for (size_t i = 0; i < a.work_prefixes.size(); ++i) {
    if (mkdir(a.work_prefixes[i], 0711) != 0 && errno != EEXIST) {
      Fail(a.err_fd, kMkdirWork, errno, static_cast<int>(i));
    }
  }
  if (mount(a.work_fd_path.c_str(), p.work_dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    Fail(a.err_fd, kBindWork, errno);
  }
  // The slice's ledger (root-owned) on a mount point in the work dir: the task can reach the
  // socket but can neither rename the mount point nor put a socket of its own in its place.
  if (a.ledger_fd >= 0 &&
      mount(a.ledger_fd_path.c_str(), a.ledger_mount.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    Fail(a.err_fd, kBindLedger, errno);
  }
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    Fail(a.err_fd, kProc, errno);
  }
  const long child = RawClone(0);
  if (child < 0) Fail(a.err_fd, kFork, errno);
  if (child == 0) RunProgram(a);
  close(a.err_fd);
  // Only the status pipe stays open while the task runs.
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != a.status_fd && fd != a.status_file_fd) close(fd);
  }
  while (true) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&all, &info);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      kill(static_cast<pid_t>(child), sig);
      continue;
    }
    int ws = 0;
    pid_t r;
    while ((r = waitpid(-1, &ws, WNOHANG)) > 0) {
      if (r == child) {
        [[maybe_unused]] ssize_t n = write(a.status_fd, &ws, sizeof(ws));
        if (a.status_file_fd >= 0) {
          // For an agent process that is not this init's parent (a restart, issue 30).
          char buf[32];
          n = pwrite(a.status_file_fd, buf, FormatWaitStatus(ws, buf), 0);
          fsync(a.status_file_fd);
        }
        _exit(0);
      }
    }
  }
}

std::string Describe(const LaunchPlan& p, const SetupError& e) {
  const std::string why = std::strerror(e.err);
  auto at = [&](const std::vector<std::string>& v) {
    return e.index >= 0 && static_cast<size_t>(e.index) < v.size() ? v[e.index] : std::string("?");
  };
  switch (e.step) {
    case kJoinCgroup:
      return "sandbox: cannot join the task's cgroup #" + std::to_string(e.index) + ": " + why;
    case kMountPrivate:
      return "sandbox: cannot make mounts private: " + why;
    case kHideFile:
      return "sandbox: cannot hide " + at(p.hide_files) + ": " + why;
    case kPrivateTmp:
      return "sandbox: cannot mount a private " + at(p.private_tmp) + ": " + why;
    case kHideDir:
      return "sandbox: cannot hide " + at(p.hide_dirs) + ": " + why;
    case kMkdirWork:
    case kBindWork:
      return "sandbox: cannot mount the work directory " + p.work_dir + ": " + why;
    case kBindLedger:
      return "sandbox: cannot mount the GPU slice's ledger " + p.ledger_dir + ": " + why;
    case kProc:
      return "sandbox: cannot mount /proc: " + why;
    case kNetwork:
      return "sandbox: cannot join the task's network " + p.netns_path + ": " + why;
    case kLoopback:
      return "sandbox: cannot bring up the task's loopback: " + why;
    case kResolvConf:
      return "sandbox: cannot bind " + p.resolv_conf + " over /etc/resolv.conf: " + why;
    case kFork:
      return "sandbox: cannot fork the task: " + why;
    case kSetgroups:
    case kSetgid:
    case kSetuid:
      return "sandbox: cannot switch to uid " + std::to_string(p.uid) + " gid " +
             std::to_string(p.gid) + ": " + why;
    case kNoNewPrivs:
      return "sandbox: cannot set no_new_privs: " + why;
    case kChdir:
      return "sandbox: cannot enter " + p.work_dir + ": " + why;
    case kStdio:
      return "sandbox: cannot set up stdin/stdout: " + why;
    case kExec:
      return "exec '" + p.exec_path + "': " + why;
  }
  return "sandbox: setup failed: " + why;
}

}  // namespace

Result<Launched> Launch(const LaunchPlan& plan) {
  ChildArgs a;
  a.plan = &plan;
  for (const std::string& s : plan.argv) a.argv.push_back(s.c_str());
  a.argv.push_back(nullptr);
  for (const std::string& s : plan.env) a.envp.push_back(s.c_str());
  a.envp.push_back(nullptr);
  std::vector<std::string> prefixes;
  for (size_t i = 1; i <= plan.work_dir.size(); ++i) {
    if (i == plan.work_dir.size() || plan.work_dir[i] == '/')
      prefixes.push_back(plan.work_dir.substr(0, i));
  }
  for (const std::string& s : prefixes) a.work_prefixes.push_back(s.c_str());

  const int work_fd = open(plan.work_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (work_fd < 0) {
    return Status::FailedPrecondition("sandbox: cannot open " + plan.work_dir + ": " +
                                      std::strerror(errno));
  }
  a.work_fd = work_fd;
  a.work_fd_path = "/proc/self/fd/" + std::to_string(work_fd);
  if (!plan.ledger_dir.empty()) {
    a.ledger_fd = open(plan.ledger_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (a.ledger_fd < 0) {
      close(work_fd);
      return Status::FailedPrecondition("sandbox: cannot open the GPU slice's ledger " +
                                        plan.ledger_dir + ": " + std::strerror(errno));
    }
    a.ledger_fd_path = "/proc/self/fd/" + std::to_string(a.ledger_fd);
    a.ledger_mount = plan.work_dir + "/" + kLedgerMount;
  }
  if (!plan.netns_path.empty()) {
    a.netns_fd = open(plan.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (a.netns_fd < 0) {
      const int err = errno;
      close(work_fd);
      if (a.ledger_fd >= 0) close(a.ledger_fd);
      return Status::FailedPrecondition("sandbox: cannot open the task's network " +
                                        plan.netns_path + ": " + std::strerror(err));
    }
  }
  const auto close_paths = [&] {
    close(work_fd);
    if (a.ledger_fd >= 0) close(a.ledger_fd);
    if (a.netns_fd >= 0) close(a.netns_fd);
  };
  int err_pipe[2], status_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close_paths();
    return Status::Internal(std::string("sandbox: pipe: ") + std::strerror(errno));
  }
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close_paths();
    close(err_pipe[0]);
    close(err_pipe[1]);
    return Status::Internal(std::string("sandbox: pipe: ") + std::strerror(errno));
  }
  a.err_fd = err_pipe[1];
  a.status_fd = status_pipe[1];
  if (!plan.status_file.empty()) {
    a.status_file_fd =
        open(plan.status_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (a.status_file_fd < 0) {
      const int err = errno;
      close_paths();
      for (int fd : {err_pipe[0], err_pipe[1], status_pipe[0], status_pipe[1]}) close(fd);
      return Status::Internal("sandbox: cannot create " + plan.status_file + ": " +
                              std::strerror(err));
    }
  }

  const unsigned long net = plan.netns_path.empty() && plan.own_network ? CLONE_NEWNET : 0;
  const long pid = RawClone(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | net);
  if (pid == 0) RunInit(a);
  const int clone_err = errno;
  close_paths();
  close(err_pipe[1]);
  close(status_pipe[1]);
  if (a.status_file_fd >= 0) close(a.status_file_fd);
  if (pid < 0) {
    close(err_pipe[0]);
    close(status_pipe[0]);
    return Status::FailedPrecondition(std::string("sandbox: cannot create namespaces: ") +
                                      std::strerror(clone_err));
  }
  setpgid(static_cast<pid_t>(pid), static_cast<pid_t>(pid));
  // EOF once the program has exec'd (its copy is close-on-exec) and init closed its own.
  SetupError e;
  ssize_t n;
  do {
    n = read(err_pipe[0], &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof(e))) {
    // Init may still be running (the program failed after init forked it): end it.
    kill(static_cast<pid_t>(pid), SIGKILL);
    int ws = 0;
    waitpid(static_cast<pid_t>(pid), &ws, 0);
    close(status_pipe[0]);
    const std::string msg = Describe(plan, e);
    if (e.step == kExec) {
      return e.err == ENOENT ? Status::NotFound(msg) : Status::PermissionDenied(msg);
    }
    return Status::FailedPrecondition(msg);
  }
  fcntl(status_pipe[0], F_SETFL, O_NONBLOCK);
  return Launched{static_cast<pid_t>(pid), status_pipe[0]};
}

size_t FormatWaitStatus(int wait_status, char* buf) {
  char digits[16];
  size_t n = 0;
  unsigned v = static_cast<unsigned>(wait_status);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) buf[i] = digits[n - 1 - i];
  buf[n] = '\n';
  return n + 1;
}

bool ReadExitStatus(int status_fd, int* wait_status) {
  int ws = 0;
  const ssize_t n = read(status_fd, &ws, sizeof(ws));
  if (n != static_cast<ssize_t>(sizeof(ws))) return false;
  *wait_status = ws;
  return true;
}

}  // namespace gpupool::agent::sandbox
