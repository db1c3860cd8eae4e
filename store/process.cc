#include "store/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

extern char** environ;

namespace gpupool {
namespace {

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

Result<int> Spawn(const std::vector<std::string>& argv, const std::string* log_path, int stdin_fd,
                  bool new_session) {
  if (argv.empty()) return Status::InvalidArgument("spawn: empty command");
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  if (stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  if (log_path != nullptr) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path->c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  // A clean slate for the child: no blocked signals, default handlers (the daemon blocks
  // SIGINT/SIGTERM for sigwait and ignores SIGPIPE; a server must not inherit either), and its
  // own session, so a Ctrl-C meant for the daemon does not also stop the database under it.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (new_session) flags |= POSIX_SPAWN_SETSID;
  posix_spawnattr_setflags(&attr, flags);
  std::vector<char*> args = Argv(argv);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status::Internal("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  return static_cast<int>(pid);
}

}  // namespace

Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path) {
  GPUPOOL_ASSIGN_OR_RETURN(int pid, Spawn(argv, &log_path, -1, true));
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return Status::Internal("waitpid: " + std::string(std::strerror(errno)));
  }
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 255;
}

Result<int> SpawnDetached(const std::vector<std::string>& argv, int stdin_fd) {
  return Spawn(argv, nullptr, stdin_fd, true);
}

std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) {
    if (!out.empty()) out += " | ";
    out += l;
  }
  return out;
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace gpupool
