// Runs the real gpupoolctl binary (GPUPOOLCTL_PATH, set by CMake) as a child process and
// collects what a script would see: the exit code, stdout and stderr. Shared by the end-to-end
// tests of gpupoolctl.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/pipe_write.h"

extern char** environ;

namespace gpupool::ctltest {

struct Outcome {
  int exit = -1;
  std::string out;
  std::string err;
};

// Runs gpupoolctl with `args`, the given extra environment (KEY=VALUE) and stdin text.
inline Outcome RunCtl(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {}, const std::string& input = "") {
  int in[2], out[2], err[2];
  EXPECT_EQ(pipe(in), 0);
  EXPECT_EQ(pipe(out), 0);
  EXPECT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
    posix_spawn_file_actions_addclose(&fa, fd);
  }
  std::vector<std::string> argv_s = {GPUPOOLCTL_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's environment: ours minus GPUPOOL_* and the settings file's location (a
  // developer's ~/.config/gpupool/config must not leak into tests), plus `env`.
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "GPUPOOL_", 8) == 0 || std::strncmp(*e, "HOME=", 5) == 0 ||
        std::strncmp(*e, "XDG_CONFIG_HOME=", 16) == 0) {
      continue;
    }
    env_s.emplace_back(*e);
  }
  if (std::none_of(env.begin(), env.end(),
                   [](const std::string& e) { return e.rfind("HOME=", 0) == 0; })) {
    env_s.emplace_back("HOME=/nonexistent/gpupoolctl-test-home");
  }
  // No session helper unless the test asks for one (a developer's own must not serve tests).
  if (std::none_of(env.begin(), env.end(),
                   [](const std::string& e) { return e.rfind("GPUPOOL_SESSION=", 0) == 0; })) {
    env_s.emplace_back("GPUPOOL_SESSION=off");
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  Outcome o;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(rc);
    return o;
  }
  if (!input.empty()) {
    // A gpupoolctl that fails before reading its input must fail the test with its own message,
    // not kill the test process with SIGPIPE.
    const Status written = WriteToPipe(in[1], input);
    EXPECT_TRUE(written.ok()) << written.message();
  }
  close(in[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&o.out, &o.err};
  int open = 2;
  while (open > 0) {
    if (poll(fds, 2, 60'000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  o.exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

inline std::string Dump(const Outcome& o) {
  return "exit " + std::to_string(o.exit) + "\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
}

}  // namespace gpupool::ctltest
