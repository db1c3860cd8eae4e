#include "agent/mps/mps_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/task_record.h"
#include "agent/task_runner.h"
#include "base/log.h"
#include "base/pipe_write.h"

extern char** environ;

namespace gpupool::agent {
namespace {

// A grant below all of a device's threads: its task is an MPS client.
bool SharesDevice(const DeviceGrant& g) {
  return g.thread_percentage > 0 && g.thread_percentage < 100;
}

std::string SafeKey(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// posix_spawnp `argv` with `env` (over the agent's PATH only), stdin from `in_fd` (or /dev/null),
// stdout+stderr to `out_path`.
Result<pid_t> Spawn(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env, int in_fd,
                    const std::string& out_path) {
  std::vector<std::string> env_strings;
  const char* path = std::getenv("PATH");
  env_strings.push_back(std::string("PATH=") + (path ? path : "/usr/local/bin:/usr/bin:/bin"));
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> a = argv;
  for (auto& s : a) args.push_back(s.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) {
    posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Status::NotFound("cannot run " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

// Waits for `pid` up to `timeout_ms`; kills it past that. Returns the wait status or -1.
int WaitTimed(pid_t pid, int64_t timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int ws = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid) return ws;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= end) {
      kill(-pid, SIGKILL);
      waitpid(pid, &ws, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

MpsManager::MpsManager(MpsOptions options) : options_(std::move(options)) {}

MpsManager::~MpsManager() {
  std::lock_guard lock(mu_);
  if (leaving_) return;  // their clients run on; the next agent process re-adopts them
  for (auto& [key, d] : daemons_) {
    if (d.pid <= 0) continue;
    std::string out;
    (void)CommandLocked(d, "quit\n", &out);
    bool gone = false;
    if (d.adopted) {
      int ws = 0;
      for (int i = 0; i < 400 && !(gone = EndedLocked(d, &ws)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!gone) kill(-d.pid, SIGKILL);
    } else {
      gone = WaitTimed(d.pid, 2000) >= 0;
    }
    if (!gone) LogWarn("agent.mps", "control daemon killed", {{"key", key}});
    std::error_code ec;
    std::filesystem::remove(d.dir + "/daemon.pid", ec);
    d.pid = 0;
  }
}

void MpsManager::Leave() {
  std::lock_guard lock(mu_);
  leaving_ = true;
}

bool MpsManager::EndedLocked(const Daemon& d, int* ws) const {
  if (d.adopted) return ProcessStartTicks(d.pid) != d.start_ticks;
  return waitpid(d.pid, ws, WNOHANG) == d.pid;
}

bool MpsManager::AdoptLocked(Daemon* d) {
  pid_t pid = 0;
  int64_t ticks = 0;
  std::ifstream(d->dir + "/daemon.pid") >> pid >> ticks;
  if (pid <= 0 || ticks == 0 || ProcessStartTicks(pid) != ticks) return false;
  Daemon candidate = *d;
  candidate.pid = pid;
  candidate.adopted = true;
  candidate.start_ticks = ticks;
  std::string out;
  if (!CommandLocked(candidate, "get_default_active_thread_percentage\n", &out).ok()) return false;
  *d = candidate;
  LogInfo("agent.mps", "re-adopted a control daemon of a previous agent process",
          {{"device", d->uuid}, {"tenant", d->tenant}, {"pid", std::to_string(pid)}});
  return true;
}

MpsManager::Daemon& MpsManager::DaemonOfLocked(const TaskSpec& spec, const std::string& uuid) {
  const std::string tenant = DaemonTenant(spec);
  const std::string key = tenant.empty() ? uuid : uuid + "/" + tenant;
  Daemon& d = daemons_[key];
  if (d.uuid.empty()) {
    d.uuid = uuid;
    d.tenant = tenant;
    d.dir = options_.dir + "/" + SafeKey(uuid) + (tenant.empty() ? "" : "." + SafeKey(tenant));
  }
  return d;
}

Status MpsManager::Adopt(const TaskSpec& spec) {
  std::lock_guard lock(mu_);
  for (const DeviceGrant& g : spec.devices) {
    if (!SharesDevice(g)) continue;
    Daemon& d = DaemonOfLocked(spec, g.uuid);
    if (d.pid > 0 || AdoptLocked(&d)) continue;
    return Status::Unavailable("its MPS control daemon for " + g.uuid +
                               (d.tenant.empty() ? "" : " (tenant " + d.tenant + ")") +
                               " is gone, and its clients with it");
  }
  return Status::Ok();
}

std::map<std::string, std::string> MpsManager::EnvOf(const Daemon& d) const {
  return {{"CUDA_VISIBLE_DEVICES", d.uuid},
          {"CUDA_MPS_PIPE_DIRECTORY", d.dir + "/pipe"},
          {"CUDA_MPS_LOG_DIRECTORY", d.dir + "/log"}};
}

Status MpsManager::CommandLocked(const Daemon& d, const std::string& commands,
                                 std::string* out) const {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Internal(std::string("pipe: ") + strerror(errno));
  const std::string out_path = d.dir + "/client.out";
  Result<pid_t> pid = Spawn({options_.control}, EnvOf(d), fds[0], out_path);
  close(fds[0]);
  if (!pid.ok()) {
    close(fds[1]);
    return pid.status();
  }
  // The client exits before reading when no daemon answers; that must not kill the agent.
  const Status written = WriteToPipe(fds[1], commands);
  close(fds[1]);
  const int ws = WaitTimed(*pid, options_.start_timeout_ms);
  *out = ReadAll(out_path);
  if (ws < 0) return Status::Unavailable("no answer in time");
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Status::Unavailable(out->empty() ? "exit status " + std::to_string(ws) : *out);
  }
  return written;
}

Status MpsManager::StartLocked(Daemon* d) {
  std::error_code ec;
  for (const char* sub : {"/pipe", "/log"}) {
    std::filesystem::create_directories(d->dir + sub, ec);
    if (ec) return Status::Internal("cannot create " + d->dir + sub + ": " + ec.message());
    // Tasks run as their own uids and must reach the daemon's pipes.
    chmod((d->dir + sub).c_str(), 0755);
  }
  chmod(d->dir.c_str(), 0755);
  Result<pid_t> pid = Spawn({options_.control, "-f"}, EnvOf(*d), -1, d->dir + "/daemon.out");
  if (!pid.ok()) return pid.status();
  d->pid = *pid;
  d->adopted = false;
  {
    // Its name for the next agent process (header comment), written whole or not at all.
    const std::string tmp = d->dir + "/daemon.pid.tmp";
    std::ofstream(tmp) << *pid << " " << ProcessStartTicks(*pid) << "\n";
    std::filesystem::rename(tmp, d->dir + "/daemon.pid", ec);
  }
  // Ready when it answers a command; a daemon that exits first is refused with its output.
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
  std::string out;
  Status last = Status::Unavailable("did not answer");
  while (std::chrono::steady_clock::now() < end) {
    int ws = 0;
    if (EndedLocked(*d, &ws)) {
      d->pid = 0;
      const std::string said = ReadAll(d->dir + "/daemon.out");
      return Status::Unavailable("exited at start (status " + std::to_string(ws) + ")" +
                                 (said.empty() ? "" : ": " + said));
    }
    last = CommandLocked(*d, "get_default_active_thread_percentage\n", &out);
    if (last.ok()) {
      LogInfo("agent.mps", "control daemon running",
              {{"device", d->uuid}, {"tenant", d->tenant}, {"pid", std::to_string(d->pid)}});
      return Status::Ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-d->pid, SIGKILL);
  waitpid(d->pid, nullptr, 0);
  d->pid = 0;
  return Status::Unavailable("did not answer within " + std::to_string(options_.start_timeout_ms) +
                             " ms: " + last.message());
}

Result<std::map<std::string, std::string>> MpsManager::Prepare(const TaskSpec& spec) {
  std::map<std::string, std::string> env;
  std::lock_guard lock(mu_);
  for (const DeviceGrant& g : spec.devices) {
    if (!SharesDevice(g)) continue;  // a whole device needs no MPS
    Daemon& d = DaemonOfLocked(spec, g.uuid);
    const std::string who = "mps: control daemon " + options_.control + " for " + g.uuid +
                            (d.tenant.empty() ? "" : " (tenant " + d.tenant + ")");
    // One a previous agent process left running serves again (a second daemon on the same
    // pipes would not work).
    if (d.pid <= 0 && !AdoptLocked(&d)) {
      if (Status st = StartLocked(&d); !st.ok()) {
        return Status::Unavailable(who + " did not start: " + st.message());
      }
    }
    for (const auto& [k, v] : EnvOf(d)) {
      if (k != "CUDA_VISIBLE_DEVICES") env[k] = v;  // the grant sets that one
    }
    // The client's own limits (header comment). Device 0: the daemon sees only its GPU.
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(g.thread_percentage);
    if (g.vram_mib > 0)
      env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(g.vram_mib) + "M";
  }
  return env;
}

bool MpsManager::Serves(const TaskSpec& spec) {
  return std::any_of(spec.devices.begin(), spec.devices.end(), SharesDevice);
}

std::string MpsManager::DaemonTenant(const TaskSpec& spec) const {
  return options_.per_tenant || spec.mps_tenant_isolation ? spec.tenant : "";
}

bool MpsManager::UsedBy(const TaskSpec& spec, const MpsFailure& failure) const {
  if (DaemonTenant(spec) != failure.tenant) return false;
  for (const DeviceGrant& g : spec.devices) {
    if (g.uuid == failure.uuid && SharesDevice(g)) return true;
  }
  return false;
}

std::vector<MpsFailure> MpsManager::Supervise() {
  std::vector<MpsFailure> out;
  std::lock_guard lock(mu_);
  for (auto& [key, d] : daemons_) {
    if (d.pid <= 0) continue;
    int ws = 0;
    if (!EndedLocked(d, &ws)) continue;
    const bool known = !d.adopted;  // an adopted daemon's wait status went to its parent
    d.pid = 0;
    ++d.restarts;
    std::string reason = "MPS control daemon for " + d.uuid +
                         (d.tenant.empty() ? "" : " (tenant " + d.tenant + ")") + " exited" +
                         (!known            ? std::string()
                          : WIFSIGNALED(ws) ? " (signal " + std::to_string(WTERMSIG(ws)) + ")"
                                            : " (status " + std::to_string(WEXITSTATUS(ws)) + ")") +
                         "; its clients lost their GPU context";
    const Status restarted = StartLocked(&d);
    reason += restarted.ok() ? "; daemon restarted" : "; restart failed: " + restarted.message();
    LogWarn("agent.mps", "control daemon exited", {{"key", key}, {"reason", reason}});
    out.push_back({d.uuid, d.tenant, reason});
  }
  return out;
}

std::vector<MpsDaemonState> MpsManager::States() const {
  std::vector<MpsDaemonState> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, d] : daemons_) {
    out.push_back({d.uuid, d.tenant, d.pid, d.pid > 0, d.restarts});
  }
  return out;
}

std::string MpsManager::Describe() const {
  return "managed: one control daemon (" + options_.control + ") per GPU" +
         std::string(options_.per_tenant
                         ? " per tenant (mps.isolation: tenant)"
                         : ", per tenant per GPU where the task's pool asks for isolation") +
         ", started on the first shared grant; each client's active-thread percentage and "
         "pinned-memory limit in its own environment; a daemon that exits is restarted and its "
         "tasks failed";
}

}  // namespace gpupool::agent
