#include "agent/task_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace gpupool::agent {

std::string SafeTaskName(const std::string& id) {
  std::string out = id;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out;
}

std::string AttemptName(const std::string& owner, const std::string& task_id, int32_t attempt) {
  return SafeTaskName(owner + "_" + task_id) + "." + std::to_string(attempt);
}

Result<std::string> CreateTaskDir(const std::string& data_dir, const std::string& task_id,
                                  int32_t attempt) {
  const std::string dir =
      data_dir + "/tasks/" + SafeTaskName(task_id) + "." + std::to_string(attempt);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::Internal("task " + task_id + ": cannot create " + dir + ": " + ec.message());
  return dir;
}

namespace {

// "<wait status>\n" into `buf` (at least 12 bytes) without allocating: the recorder calls it
// between fork and exit.
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

// argv and envp as execve wants them, built before a fork (the child may not allocate).
struct ExecArrays {
  ExecArrays(const std::vector<std::string>& argv, const std::vector<std::string>& env)
      : args(argv), envs(env) {
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);
    for (auto& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  ExecArrays(const ExecArrays&) = delete;
  ExecArrays& operator=(const ExecArrays&) = delete;
  std::vector<std::string> args, envs;
  std::vector<char*> argp, envp;
};

}  // namespace

Result<pid_t> SpawnProcessGroup(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const std::string& dir,
                                int log_fd) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("spawn: argv is empty");
  ExecArrays exec(argv, env);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, exec.argp[0], &fa, &attr, exec.argp.data(), exec.envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::NotFound("exec '" + argv[0] + "': " + std::strerror(rc));
  return pid;
}

namespace {

// What went wrong in the program's child before exec; written to the error pipe.
struct ExecError {
  int32_t chdir = 0;  // 1: chdir failed, 0: exec failed
  int32_t err = 0;
};

// The program's side of the recorder's fork: signals at their defaults, stdio on the log, exec.
// Async-signal-safe calls only.
[[noreturn]] void ExecProgram(const char* exec_path, char* const* argv, char* const* envp,
                              const char* dir, int log_fd, int err_fd) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ExecError e;
  if (chdir(dir) != 0) {
    e = {1, errno};
    [[maybe_unused]] ssize_t n = write(err_fd, &e, sizeof(e));
    _exit(127);
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != 0) {
    dup2(null_fd, 0);
    close(null_fd);
  }
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  // Everything else closes at exec; the error pipe stays open until then.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execve(exec_path, argv, envp);
  e = {0, errno};
  [[maybe_unused]] ssize_t n = write(err_fd, &e, sizeof(e));
  _exit(127);
}

// The recorder: the group's leader while the program runs.
[[noreturn]] void RecordProgram(const char* exec_path, char* const* argv, char* const* envp,
                                const char* dir, int log_fd, int err_fd, int status_fd) {
  setpgid(0, 0);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  // The agent's handlers must not run here (one writes to the agent's signal pipe).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) sigaction(sig, &ign, nullptr);
  prctl(PR_SET_NAME, "gpupool-task", 0, 0, 0);
  const pid_t child = fork();
  if (child == 0) ExecProgram(exec_path, argv, envp, dir, log_fd, err_fd);
  if (child < 0) _exit(127);
  // Nor its stdio (a harness reading the agent's output would wait for this process too).
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd > 0) dup2(null_fd, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  // Nothing of the agent's stays open here (its connections, the lease keeper's socket: the
  // keeper must see the agent's end when the agent dies): only the status file.
  close_range(3, static_cast<unsigned>(status_fd) - 1, 0);
  close_range(static_cast<unsigned>(status_fd) + 1, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int ws = 0;
  while (waitpid(child, &ws, 0) < 0) {
    if (errno != EINTR) _exit(127);
  }
  char buf[32];
  const size_t len = FormatWaitStatus(ws, buf);
  [[maybe_unused]] ssize_t n = pwrite(status_fd, buf, len, 0);
  fsync(status_fd);
  _exit(WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
}

}  // namespace

Result<pid_t> SpawnRecordedGroup(const std::string& exec_path, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& dir,
                                 int log_fd, const std::string& status_path) {
  if (argv.empty() || exec_path.empty()) return Status::InvalidArgument("spawn: argv is empty");
  // Everything the children use is made here: after the fork they may not allocate.
  ExecArrays exec(argv, env);
  const int status_fd = open(status_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (status_fd < 0) {
    return Status::Internal("spawn: cannot create " + status_path + ": " + std::strerror(errno));
  }
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    close(status_fd);
    return Status::Internal(std::string("spawn: pipe: ") + std::strerror(err));
  }
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = fork();
  if (pid == 0) {
    close(err_pipe[0]);
    RecordProgram(exec_path.c_str(), exec.argp.data(), exec.envp.data(), dir.c_str(), log_fd,
                  err_pipe[1], status_fd);
  }
  const int fork_err = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  close(err_pipe[1]);
  close(status_fd);
  if (pid < 0) {
    close(err_pipe[0]);
    return Status::Internal(std::string("spawn: fork: ") + std::strerror(fork_err));
  }
  setpgid(pid, pid);  // both sides, as job control does: the group exists when we return
  // End of file once the program has exec'd and the recorder has closed its copy.
  ExecError e;
  ssize_t n;
  do {
    n = read(err_pipe[0], &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n != static_cast<ssize_t>(sizeof(e))) return pid;
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  unlink(status_path.c_str());
  const std::string what = e.chdir ? "chdir '" + dir + "': " + std::strerror(e.err)
                                   : "exec '" + argv[0] + "': " + std::strerror(e.err);
  if (e.err == EACCES || e.err == EPERM) return Status::PermissionDenied(what);
  return Status::NotFound(what);
}

std::optional<int> ReadRecordedStatus(const std::string& status_path) {
  std::ifstream in(status_path);
  long long ws = 0;
  if (!(in >> ws) || ws < 0 || ws > 0xffff) return std::nullopt;
  return static_cast<int>(ws);
}

}  // namespace gpupool::agent
