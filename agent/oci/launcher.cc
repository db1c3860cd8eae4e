#include "agent/oci/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "agent/sandbox/cgroup.h"
#include "base/run_tool.h"

namespace gpupool::agent::oci {
namespace {

using nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<ToolResult> Runc(const LauncherOptions& o, std::vector<std::string> args) {
  std::vector<std::string> argv = {o.runc, "--root", o.state_root};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunTool(
      ToolRun{.argv = argv, .env = {}, .pass_fd = -1, .timeout_ms = 60'000, .stdout_fd = -1});
}

// ---- the shim ----

// Spawns argv with the shim's own stdio (the container inherits it); returns the pid.
pid_t SpawnInherit(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const char* envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        nullptr};
  int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), const_cast<char**>(envp));
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string RuncLogError(const std::string& path) {
  std::istringstream lines(ReadAll(path));
  std::string last;
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("level") && j["level"] == "error" && j.contains("msg") &&
        j["msg"].is_string()) {
      last = j["msg"].get<std::string>();
    }
  }
  return last;
}

void WriteResult(const std::string& bundle, const ContainerExit& exit) {
  json j{{"exit_code", exit.exit_code},
         {"signal", exit.signal},
         {"oom_kills", exit.oom_kills},
         {"cpu_usec", exit.cpu_usec},
         {"peak_memory_bytes", exit.peak_memory_bytes},
         {"reason", exit.reason}};
  std::string tmp = bundle + "/result.json.tmp";
  std::ofstream(tmp) << j.dump();
  rename(tmp.c_str(), (bundle + "/result.json").c_str());
}

}  // namespace

int ContainerExit::shim_exit_code() const {
  if (exit_code >= 0) return exit_code;
  if (signal > 0) return 128 + signal;
  return 125;
}

int ShimMain(int argc, char** argv) {
  std::string runc = "runc", root, bundle, id;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--runc") runc = value;
    if (flag == "--root") root = value;
    if (flag == "--bundle") bundle = value;
    if (flag == "--id") id = value;
  }
  if (root.empty() || bundle.empty() || id.empty()) {
    fprintf(stderr, "usage: gpupool-oci-shim --runc PATH --root DIR --bundle DIR --id ID\n");
    return 125;
  }
  // The watchdog: a child in its own session that deletes the container once this shim is gone,
  // however it went (a SIGKILL to the task's process group included), so a container never
  // outlives its shim. It waits for EOF on a pipe only this process holds open.
  int alive[2];
  if (pipe2(alive, O_CLOEXEC) != 0) {
    perror("gpupool-oci-shim: pipe");
    return 125;
  }
  pid_t watchdog = fork();
  if (watchdog < 0) {
    perror("gpupool-oci-shim: fork");
    return 125;
  }
  if (watchdog == 0) {
    close(alive[1]);
    setsid();
    char byte;
    while (read(alive[0], &byte, 1) < 0 && errno == EINTR) {
    }
    pid_t del = SpawnInherit({runc, "--root", root, "delete", "--force", id});
    if (del > 0) WaitExit(del);
    _exit(0);
  }
  close(alive[0]);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  if (sfd < 0) {
    perror("gpupool-oci-shim: signalfd");
    return 125;
  }

  ContainerExit result;
  std::string log = bundle + "/runc.log", pid_file = bundle + "/init.pid";
  unlink(log.c_str());
  pid_t create = SpawnInherit({runc, "--root", root, "--log", log, "--log-format", "json", "create",
                               "--bundle", bundle, "--pid-file", pid_file, id});
  int rc = create > 0 ? WaitExit(create) : -1;
  if (rc != 0) {
    result.reason = "runc create: " + RuncLogError(log);
    WriteResult(bundle, result);
    fprintf(stderr, "gpupool-oci-shim: %s\n", result.reason.c_str());
    close(alive[1]);
    while (waitpid(-1, nullptr, 0) > 0) {
    }
    return 125;
  }
  pid_t init = static_cast<pid_t>(std::atoll(ReadAll(pid_file).c_str()));
  if (init <= 1) {  // never signal 0, -1 or 1
    result.reason = "runc create: no init pid in " + pid_file;
    WriteResult(bundle, result);
    fprintf(stderr, "gpupool-oci-shim: %s\n", result.reason.c_str());
    close(alive[1]);
    while (waitpid(-1, nullptr, 0) > 0) {
    }
    return 125;
  }
  // Its groups (runc made them), read once the init has exited and before runc deletes them.
  const sandbox::CgroupLayout layout = sandbox::CgroupLayout::Detect();
  const std::map<sandbox::Controller, std::string> groups = sandbox::CgroupDirsOf(layout, init);
  pid_t start =
      SpawnInherit({runc, "--root", root, "--log", log, "--log-format", "json", "start", id});
  if (start <= 0 || WaitExit(start) != 0) {
    result.reason = "runc start: " + RuncLogError(log);
    kill(init, SIGKILL);
  } else {
    // The task's program runs now: the agent reports RUNNING on seeing this (launcher.h).
    const int marker = open((bundle + "/" + kStartedMarker).c_str(),
                            O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (marker >= 0) close(marker);
  }
  int status = 0;
  bool exited = false;
  while (!exited) {
    signalfd_siginfo info{};
    if (read(sfd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) {
      if (errno == EINTR) continue;
      // No more signals to read: wait for the init itself (nothing is forwarded any more).
      while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    if (info.ssi_signo != SIGCHLD) {
      kill(init, static_cast<int>(info.ssi_signo));
      continue;
    }
    for (pid_t p; (p = waitpid(-1, &status, WNOHANG)) > 0;) {
      if (p == init) {
        exited = true;
        break;
      }
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  const sandbox::CgroupUsage used = sandbox::ReadCgroupUsage(layout, groups);
  result.oom_kills = used.oom_kills;
  result.cpu_usec = used.cpu_usec;
  result.peak_memory_bytes = used.peak_memory_bytes;
  if (result.reason.empty()) {
    result.reason = result.exit_code >= 0 ? "exit " + std::to_string(result.exit_code)
                                          : "killed by signal " + std::to_string(result.signal);
    if (result.oom_killed()) result.reason += " (OOM: memory limit)";
  }
  WriteResult(bundle, result);
  close(alive[1]);  // the watchdog deletes the container now
  WaitExit(watchdog);
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return result.shim_exit_code();
}

// ---- the launcher ----

std::vector<std::string> Launcher::ShimArgv(const std::string& bundle,
                                            const std::string& id) const {
  return {options_.shim, "--runc", options_.runc, "--root", options_.state_root,
          "--bundle",    bundle,   "--id",        id};
}

Result<pid_t> Launcher::Start(const std::string& bundle, const std::string& id, int log_fd) const {
  unlink((bundle + "/result.json").c_str());
  std::vector<std::string> args = ShimArgv(bundle, id);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const char* envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        nullptr};
  int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), const_cast<char**>(envp));
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::NotFound("cannot run shim '" + options_.shim + "': " + strerror(rc));
  return pid;
}

Result<ContainerExit> Launcher::Wait(pid_t shim, const std::string& bundle) const {
  int status = 0;
  while (waitpid(shim, &status, 0) < 0) {
    if (errno != EINTR) return Status::Internal("waitpid shim: " + std::string(strerror(errno)));
  }
  auto result = ReadResult(bundle + "/result.json");
  if (!result.ok() && WIFSIGNALED(status)) {
    return Status::Aborted("shim killed by signal " + std::to_string(WTERMSIG(status)) +
                           "; the container may still run (Delete it)");
  }
  return result;
}

Result<ContainerExit> Launcher::Run(const std::string& bundle, const std::string& id,
                                    int log_fd) const {
  GPUPOOL_ASSIGN_OR_RETURN(pid_t pid, Start(bundle, id, log_fd));
  return Wait(pid, bundle);
}

Result<ContainerExit> Launcher::ReadResult(const std::string& path) {
  json j = json::parse(ReadAll(path), nullptr, false);
  if (!j.is_object()) return Status::NotFound("no shim result at " + path);
  ContainerExit e;
  try {
    e.exit_code = j.value("exit_code", -1);
    e.signal = j.value("signal", 0);
    e.oom_kills = j.value("oom_kills", int64_t{0});
    e.cpu_usec = j.value("cpu_usec", int64_t{0});
    e.peak_memory_bytes = j.value("peak_memory_bytes", int64_t{0});
    e.reason = j.value("reason", "");
  } catch (const json::exception& ex) {
    return Status::Internal("shim result " + path + ": " + ex.what());
  }
  return e;
}

Result<pid_t> Launcher::InitPid(const std::string& id) const {
  GPUPOOL_ASSIGN_OR_RETURN(auto run, Runc(options_, {"state", id}));
  if (!run.ok()) return Status::NotFound("container " + id + ": " + run.Describe());
  json j = json::parse(run.out, nullptr, false);
  if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() ||
      j["pid"].get<int64_t>() <= 0) {
    return Status::NotFound("container " + id + ": no running init");
  }
  return static_cast<pid_t>(j["pid"].get<int64_t>());
}

Status Launcher::Kill(const std::string& id, int signal) const {
  GPUPOOL_ASSIGN_OR_RETURN(auto run, Runc(options_, {"kill", id, std::to_string(signal)}));
  if (!run.ok()) return Status::NotFound("runc kill " + id + ": " + run.Describe());
  return Status::Ok();
}

Status Launcher::Stop(const std::string& id, int64_t grace_ms) const {
  Status st = Kill(id, SIGTERM);
  if (!st.ok()) return st;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < end) {
    auto pid = InitPid(id);
    if (!pid.ok() || kill(*pid, 0) != 0) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  st = Kill(id, SIGKILL);
  return st.code() == StatusCode::kNotFound ? Status::Ok() : st;
}

Status Launcher::Delete(const std::string& id) const {
  GPUPOOL_ASSIGN_OR_RETURN(auto run, Runc(options_, {"delete", "--force", id}));
  if (!run.ok() && run.err.find("does not exist") == std::string::npos) {
    return Status::Internal("runc delete " + id + ": " + run.Describe());
  }
  return Status::Ok();
}

Result<int> Launcher::DeleteAll(const std::string& prefix,
                                const std::vector<std::string>& keep) const {
  GPUPOOL_ASSIGN_OR_RETURN(auto run, Runc(options_, {"list", "-q"}));
  if (!run.ok()) return Status::Internal("runc list: " + run.Describe());
  std::istringstream ids(run.out);
  int n = 0;
  for (std::string id; std::getline(ids, id);) {
    if (id.rfind(prefix, 0) != 0) continue;
    if (std::find(keep.begin(), keep.end(), id) != keep.end()) continue;
    GPUPOOL_RETURN_IF_ERROR(Delete(id));
    ++n;
  }
  return n;
}

}  // namespace gpupool::agent::oci
