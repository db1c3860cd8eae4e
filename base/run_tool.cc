#include "base/run_tool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace gpupool {
namespace {

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, end - begin + 1);
}

void Drain(int fd, std::string* into, bool* open) {
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) {
    into->append(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    *open = false;
  }
}

}  // namespace

std::string ToolResult::Describe() const {
  std::string what = timed_out        ? "timed out"
                     : exit_code >= 0 ? "exit " + std::to_string(exit_code)
                                      : "killed by signal " + std::to_string(signal);
  std::string line = LastLine(err);
  return line.empty() ? what : what + ": " + line;
}

Result<int> SecretFd(const std::string& name, const std::string& content) {
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return Status::Internal("memfd_create: " + std::string(strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return Status::Internal("memfd write: " + std::string(strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

Result<ToolResult> RunTool(const ToolRun& run) {
  if (run.argv.empty()) return Status::InvalidArgument("RunTool: empty argv");
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return Status::Internal("pipe: " + std::string(strerror(errno)));
  }
  // Descriptor 3 in the child: move the secret off 3 first if it happens to sit there (dup2 onto
  // itself would keep close-on-exec).
  int pass = run.pass_fd;
  int moved = -1;
  if (pass == 3) {
    moved = fcntl(pass, F_DUPFD_CLOEXEC, 10);
    pass = moved;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, run.stdout_fd >= 0 ? run.stdout_fd : out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  if (pass >= 0) posix_spawn_file_actions_adddup2(&fa, pass, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // A process group of its own, so a timeout kills what the tool started too (a shell script's
  // children would otherwise outlive it, holding its pipes open).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env = run.env;
  bool has_path = false;
  for (const auto& e : env) has_path = has_path || e.rfind("PATH=", 0) == 0;
  if (!has_path) env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  std::vector<char*> argv, envp;
  for (const auto& a : run.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (moved >= 0) close(moved);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status::NotFound("cannot run '" + run.argv[0] + "': " + strerror(rc));
  }

  ToolResult result;
  bool out_open = true, err_open = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(run.timeout_ms);
  while (out_open || err_open) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int wait_ms = -1;
    if (run.timeout_ms > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) {
        kill(-pid, SIGKILL);  // the whole group (above)
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left);
    }
    if (!out_open) fds[0].fd = -1;
    if (!err_open) fds[1].fd = -1;
    int n = poll(fds, 2, wait_ms);
    if (n < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      Drain(out_pipe[0], &result.out, &out_open);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      Drain(err_pipe[0], &result.err, &err_open);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace gpupool
