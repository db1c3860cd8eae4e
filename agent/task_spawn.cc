#include "agent/task_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

#include <cctype>
#include <cstring>
#include <filesystem>

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

Result<pid_t> SpawnProcessGroup(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, const std::string& dir,
                                int log_fd) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("spawn: argv is empty");
  std::vector<std::string> args = argv, envs = env;
  std::vector<char*> argp, envp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
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
  const int rc = posix_spawnp(&pid, argp[0], &fa, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::NotFound("exec '" + argv[0] + "': " + std::strerror(rc));
  return pid;
}

}  // namespace gpupool::agent
