#include "agent/task_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/lease_keeper.h"
#include "agent/mps/mps_manager.h"
#include "agent/oci/container.h"
#include "agent/sandbox/sandbox.h"
#include "agent/scrub/device_guard.h"
#include "agent/slices/slice_ledgers.h"
#include "agent/task_record.h"
#include "agent/task_runner_task.h"
#include "agent/task_spawn.h"
#include "base/log.h"

extern char** environ;

namespace gpupool::agent {

namespace {

constexpr int64_t kPollMicros = 20'000;  // group-empty checks and pidfd-less fallback

// 247250 → "247.25"; 989000 → "989".
std::string MilliToDecimal(int64_t milli) {
  std::string s = std::to_string(milli / 1000);
  int64_t frac = milli % 1000;
  if (frac == 0) return s;
  std::string f = std::to_string(1000 + frac).substr(1);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return s + "." + f;
}

// argv[0] as execvp would find it on `path` (the agent's PATH); "" when nowhere.
std::string ResolveProgram(const std::string& prog, const std::string& path) {
  if (prog.find('/') != std::string::npos) return prog;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + prog;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

bool GroupAlive(pid_t pgid) { return kill(-pgid, 0) == 0; }

std::string ReadTail(const std::string& path, int64_t bytes) {
  if (bytes <= 0) return {};
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string out;
  if (fstat(fd, &st) == 0) {
    const int64_t from = std::max<int64_t>(0, st.st_size - bytes);
    out.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = pread(fd, out.data(), out.size(), from);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  return out;
}

bool LooksLikeOom(const std::string& tail) {
  std::string lower = tail;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("out of memory") != std::string::npos ||
         lower.find("outofmemoryerror") != std::string::npos;
}

}  // namespace

const char* TaskPhaseName(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kRunning:
      return "RUNNING";
    case TaskPhase::kSucceeded:
      return "SUCCEEDED";
    case TaskPhase::kFailed:
      return "FAILED";
    case TaskPhase::kCancelled:
      return "CANCELLED";
    case TaskPhase::kPulling:
      return "PULLING";
  }
  return "?";
}

std::map<std::string, std::string> TaskRunner::GrantEnv(const TaskSpec& spec) {
  std::map<std::string, std::string> env;
  std::string visible, mem_limit;
  int32_t pct = 0;
  int64_t milli = 0, vram = 0;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const DeviceGrant& d = spec.devices[i];
    visible += (i ? "," : "") + d.uuid;
    // MPS takes device ordinals relative to CUDA_VISIBLE_DEVICES.
    if (d.vram_mib > 0) {
      mem_limit += (mem_limit.empty() ? "" : ",") + std::to_string(i) + "=" +
                   std::to_string(d.vram_mib) + "M";
    }
    // One percentage per process: the largest share among its devices.
    pct = std::max(pct, d.thread_percentage <= 0 ? 100 : std::min(100, d.thread_percentage));
    milli += d.milli_tflops;
    vram += d.vram_mib;
  }
  env["CUDA_VISIBLE_DEVICES"] = visible;
  if (!spec.devices.empty()) {
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(pct);
    if (!mem_limit.empty()) env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = mem_limit;
  }
  env["GPUPOOL_TASK_ID"] = spec.task_id;
  env["GPUPOOL_JOB_ID"] = spec.job_id;
  env["GPUPOOL_TENANT"] = spec.tenant;
  env["GPUPOOL_ATTEMPT"] = std::to_string(spec.attempt);
  env["GPUPOOL_TFLOPS"] = MilliToDecimal(milli);
  env["GPUPOOL_VRAM_MIB"] = std::to_string(vram);
  return env;
}

TaskRunner::TaskRunner(TaskRunnerOptions options) : options_(std::move(options)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { Loop(); });
  if (options_.slices) {
    options_.slices->SetBypassHandler(
        [this](const std::string& key, const std::string& reason) { FailSlice(key, reason); });
  }
}

void TaskRunner::FailSlice(const std::string& slice_key, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    for (auto& [id, t] : tasks_) {
      if (t->slice_key != slice_key || t->status.terminal()) continue;
      if (t->violation.empty()) t->violation = reason;
      BeginStop(t.get(), 0, reason, false);  // the rest of it goes too, at once
    }
  }
  Wake();
}

TaskRunner::~TaskRunner() {
  if (options_.slices) options_.slices->SetBypassHandler(nullptr);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  Wake();
  {
    // A pull in flight runs to its end (the image store's own timeouts bound it); its thread then
    // sees stopping_ and starts nothing.
    std::lock_guard start_lock(start_mu_);
    for (PullThread& p : pulls_) p.thread.join();
    pulls_.clear();
  }
  thread_.join();
  for (auto& [id, t] : tasks_) {
    if (leaving_ && !t->status.terminal()) {
      // Left for the next agent process: not killed, not waited for, its sandbox kept.
      if (t->pidfd >= 0) close(t->pidfd);
      if (t->container) t->container->Abandon();
      continue;
    }
    if (t->reaped || t->pid <= 0) continue;
    kill(-t->pid, SIGKILL);
    int st = 0;
    waitpid(t->pid, &st, 0);
    if (t->pidfd >= 0) close(t->pidfd);
  }
  close(wake_fd_);
  close(epoll_fd_);
}

void TaskRunner::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
}

void TaskRunner::SetListener(const std::string& owner, Listener listener) {
  std::vector<TaskStatus> held;
  {
    std::lock_guard lock(mu_);
    listeners_[owner] = listener;
    auto it = undelivered_.find(owner);
    if (it != undelivered_.end()) {
      held = std::move(it->second);
      undelivered_.erase(it);
    }
  }
  // Final statuses that ended before anyone listened (Recover()), in the order they ended.
  for (const TaskStatus& st : held) listener(st);
}

void TaskRunner::RemoveListener(const std::string& owner) {
  std::lock_guard lock(mu_);
  listeners_.erase(owner);
}

Result<TaskStatus> TaskRunner::Start(const TaskSpec& spec) {
  if (spec.task_id.empty()) return Status::InvalidArgument("StartTask: task_id is empty");
  std::lock_guard start_lock(start_mu_);  // one Start at a time: check-then-spawn is atomic
  // An image brings its own entrypoint and Cmd; a plain command must name its program.
  if (spec.image.empty() && (spec.argv.empty() || spec.argv[0].empty())) {
    return Status::InvalidArgument("StartTask " + spec.task_id + ": argv is empty");
  }
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(spec.task_id);
    if (it != tasks_.end()) {
      Task& t = *it->second;
      // Same or older attempt, or a newer one while the old still runs: report, start nothing.
      if (spec.attempt <= t.status.attempt || !t.status.terminal()) return t.status;
    }
  }
  // One sandbox path: where the node runs containers, a plain command runs in one too, on a
  // read-only view of the host's directories (docs/sandbox.md, "Plain commands under runc").
  if (!spec.image.empty() || options_.containers) return StartContainer(spec);
  return Spawn(spec);
}

namespace {

// A status naming the task attempt `spec` is, with its grant.
TaskStatus StatusOf(const TaskSpec& spec) {
  TaskStatus st;
  st.owner = spec.owner;
  st.task_id = spec.task_id;
  st.tenant = spec.tenant;
  st.attempt = spec.attempt;
  st.devices = spec.devices;
  return st;
}

}  // namespace

Result<std::unique_ptr<TaskRunner::Task>> TaskRunner::NewTask(const TaskSpec& spec) const {
  auto task = std::make_unique<Task>();
  task->spec = spec;
  GPUPOOL_ASSIGN_OR_RETURN(task->dir, CreateTaskDir(options_.data_dir, spec.task_id, spec.attempt));
  task->status = StatusOf(spec);
  return task;
}

Result<TaskStatus> TaskRunner::Spawn(const TaskSpec& spec) {
  GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<Task> task, NewTask(spec));
  if (options_.sandbox) {
    // One sandbox path (issue 25): where the sandbox is on, the OCI runtime confines every task;
    // without it nothing runs, never a task unconfined (docs/sandbox.md).
    std::lock_guard lock(mu_);
    Task* t = Insert(std::move(task));
    FinishUnstarted(t, TaskPhase::kFailed, 126,
                    "sandbox: tasks run confined by the OCI runtime, which this node cannot use (" +
                        options_.containers_off + ")",
                    nullptr);
    Forget();
    return t->status;
  }
  std::error_code ec;
  const std::string log_path = task->dir + "/output.log";
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Status::Internal("task " + spec.task_id + ": cannot open " + log_path + ": " +
                            std::strerror(errno));
  }

  // Environment: agent's (optional) < task's < grant.
  std::map<std::string, std::string> env;
  if (options_.inherit_env) {
    for (char** e = environ; e && *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  for (const auto& [k, v] : GrantEnv(spec)) env[k] = v;
  std::string slice_error;
  if (options_.slices && SliceLedgers::Shared(spec)) {
    // The slice is held by the task's ledger and the interposer; none, no task.
    const std::string abs_dir =
        std::filesystem::absolute(task->dir, ec).lexically_normal().string();
    const std::string key = AttemptName(spec.owner, spec.task_id, spec.attempt);
    const std::string dir = abs_dir + "/ledger";
    auto slice_env = options_.slices->Start(key, dir, spec);
    if (slice_env.ok()) {
      task->slice_key = key;
      task->slice_dir = dir;
      for (const auto& [k, v] : *slice_env) env[k] = v;
    } else {
      slice_error = slice_env.status().message();
    }
  }
  std::string mps_error;
  if (options_.mps) {
    // Shared grants are enforced by an MPS control daemon the agent runs; none, no task.
    auto mps_env = options_.mps->Prepare(spec);
    if (mps_env.ok()) {
      for (const auto& [k, v] : *mps_env) env[k] = v;
    } else {
      mps_error = mps_env.status().message();
    }
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);

  pid_t pid = 0;
  std::string start_error;
  int start_exit = 127;
  std::vector<std::string> uuids;
  for (const DeviceGrant& d : spec.devices) uuids.push_back(d.uuid);
  if (!slice_error.empty()) {
    start_error = slice_error;
    start_exit = 126;
  } else if (!mps_error.empty()) {
    start_error = mps_error;
    start_exit = 126;
  } else if (options_.device_guard) {
    // Another tenant's leftovers are scrubbed off the devices before this task may run there.
    const Status guard = options_.device_guard->BeforeStart(spec.tenant, uuids);
    if (guard.ok()) {
      task->guarded = true;
    } else {
      start_error = guard.message();
      start_exit = 126;
    }
  }
  if (!start_error.empty()) {
    // Not started: nothing to launch.
  } else if (const std::string why = PortsRefused(spec); !why.empty()) {
    start_error = why;
    start_exit = 126;
  } else if (spec.network && *spec.network != net::NetworkMode::kHost) {
    // Unconfined, a task would share the node's network: not what its pool asked for.
    start_error = std::string("network: ") + net::NetworkModeName(*spec.network) +
                  ": needs the sandbox (sandbox.enabled is off on this node)";
    start_exit = 126;
  } else {
    // Found on the agent's PATH, as posix_spawnp would; a path with a '/' is taken as given
    // (relative to the task's directory).
    const char* agent_path = std::getenv("PATH");
    const std::string exec =
        ResolveProgram(spec.argv[0], agent_path ? agent_path : "/usr/local/bin:/usr/bin:/bin");
    if (exec.empty()) {
      start_error = "exec '" + spec.argv[0] + "': " + std::strerror(ENOENT);
    } else {
      auto spawned = SpawnRecordedGroup(exec, spec.argv, env_strings, task->dir, log_fd,
                                        task->dir + "/exit_status");
      if (spawned.ok()) {
        pid = *spawned;
        task->kind = TaskKind::kRecorded;
      } else {
        start_error = spawned.status().message();
      }
    }
  }

  close(log_fd);
  TaskStatus out;
  std::chrono::steady_clock::time_point accepted;
  {
    std::lock_guard lock(mu_);
    Task* t = Insert(std::move(task));
    if (!start_error.empty()) {
      FinishUnstarted(t, TaskPhase::kFailed, start_exit, start_error, nullptr);
      Forget();
      return t->status;
    }
    Supervise(t, pid);
    out = t->status;
    accepted = t->accepted;
  }
  Wake();
  if (options_.on_start) {
    options_.on_start(
        {false, false,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - accepted).count()});
  }
  LogInfo("agent.runner", "task started",
          {{"task", spec.task_id},
           {"attempt", std::to_string(spec.attempt)},
           {"pid", std::to_string(pid)},
           {"owner", spec.owner}});
  return out;
}

TaskRunner::Task* TaskRunner::Insert(std::unique_ptr<Task> task) {
  const std::string id = task->spec.task_id;
  auto it = tasks_.find(id);
  if (it != tasks_.end()) {
    finished_order_.erase(std::remove(finished_order_.begin(), finished_order_.end(), id),
                          finished_order_.end());
  }
  Task* t = task.get();
  tasks_[id] = std::move(task);
  return t;
}

void TaskRunner::Supervise(Task* t, pid_t pid) {
  t->pid = pid;
  if (options_.lease_keeper) options_.lease_keeper->Track(pid);
  TaskStatus& st = t->status;
  st.pid = pid;
  st.phase = TaskPhase::kRunning;
  st.endpoints = EndpointsOf(*t);
  if (t->spec.max_runtime_ms > 0) {
    t->runtime_deadline = options_.clock->MonotonicMicros() + t->spec.max_runtime_ms * 1000;
  }
  if (t->container) t->kind = TaskKind::kContainer;
  t->leader_start = ProcessStartTicks(pid);
  t->started_unix_ms = options_.clock->NowMicros() / 1000;
  std::ofstream(t->dir + "/state") << FormatTaskRecord(RecordOf(*t));
  // The slice's watchdog follows the task's processes from its leader down.
  if (!t->slice_key.empty()) options_.slices->Watch(t->slice_key, pid);
  WatchPid(t, pid);
}

TaskRecord TaskRunner::RecordOf(const Task& t) const {
  TaskRecord r;
  r.spec = t.spec;
  r.kind = t.kind;
  r.pid = t.pid;
  r.leader_start = t.leader_start;
  r.started_unix_ms = t.started_unix_ms;
  if (t.container) {
    r.uid = t.container->identity().uid;
    r.container = t.container->id();
    r.image_digest = t.container->image_digest();
    r.rootfs_overlay = t.container->rootfs().overlay;
  }
  r.slice_key = t.slice_key;
  r.mps = options_.mps != nullptr && MpsManager::Serves(t.spec);
  r.isolated_network =
      t.spec.network.value_or(options_.default_network) == net::NetworkMode::kIsolated;
  if (t.container) {
    r.network_slot = t.container->network_slot();
    r.published = t.container->published();
  }
  return r;
}

net::NetworkMode TaskRunner::NetworkFor(const TaskSpec& spec) const {
  // Unconfined (no sandbox, no runtime) a task shares the node's network unless its pool asked
  // for another, which then fails it (Spawn).
  if (spec.image.empty() && !options_.containers && !options_.sandbox) {
    return spec.network.value_or(net::NetworkMode::kHost);
  }
  return spec.network.value_or(options_.default_network);
}

std::string TaskRunner::PortsRefused(const TaskSpec& spec) const {
  if (spec.ports.empty() || NetworkFor(spec) != net::NetworkMode::kNone) return "";
  return "network: the task declares ports, and its network is none (nothing can reach it): "
         "its pool needs network isolated or host (Pool.network; else the node's "
         "network.default)";
}

std::vector<TaskEndpoint> TaskRunner::EndpointsOf(const Task& t) const {
  const std::string& host =
      options_.advertise_host.empty() ? t.spec.owner : options_.advertise_host;
  std::vector<TaskEndpoint> out;
  std::vector<net::PublishedPort> published;
  if (t.container) published = t.container->published();
  for (const net::PublishedPort& p : published) out.push_back({p.spec, host, p.host_port});
  if (out.empty() && NetworkFor(t.spec) == net::NetworkMode::kHost) {
    // The node's own network: the task listens on the node's port itself.
    for (const TaskPort& p : t.spec.ports) out.push_back({p, host, p.port});
  }
  return out;
}

void TaskRunner::WatchPid(Task* t, pid_t pid) {
  t->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (t->pidfd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(pid);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, t->pidfd, &ev);
  }
}

void TaskRunner::Deliver(const TaskStatus& st, std::vector<std::pair<Listener, TaskStatus>>* out) {
  auto l = listeners_.find(st.owner);
  if (l != listeners_.end()) {
    out->emplace_back(l->second, st);
  } else if (st.terminal()) {
    undelivered_[st.owner].push_back(st);
  }
}

void TaskRunner::FinishUnstarted(Task* t, TaskPhase phase, int exit_code, const std::string& reason,
                                 std::vector<std::pair<Listener, TaskStatus>>* out) {
  const TaskSpec& spec = t->spec;
  if (t->guarded) {
    std::vector<std::string> uuids;
    for (const DeviceGrant& d : spec.devices) uuids.push_back(d.uuid);
    options_.device_guard->Ended(spec.tenant, uuids);
    t->guarded = false;
  }
  if (!t->slice_key.empty()) options_.slices->Stop(t->slice_key);
  t->slice_key.clear();
  if (t->container) to_release_.push_back(std::move(t->container));
  t->pulling = false;
  {
    std::ofstream log(t->dir + "/output.log", std::ios::app);
    log << reason << "\n";
  }
  TaskStatus& st = t->status;
  st.phase = phase;
  st.exit_code = exit_code;
  st.reason = reason;
  st.output_tail = ReadTail(t->dir + "/output.log", options_.tail_bytes);
  t->reaped = true;
  if (phase == TaskPhase::kFailed) {
    LogWarn("agent.runner", "task failed to start", {{"task", spec.task_id}, {"error", reason}});
  }
  finished_order_.push_back(spec.task_id);
  if (out == nullptr) return;
  Deliver(st, out);
}

std::optional<TaskStatus> TaskRunner::Stop(const std::string& task_id, int32_t attempt,
                                           int64_t grace_ms, const std::string& reason) {
  std::optional<TaskStatus> out;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return std::nullopt;
    Task& t = *it->second;
    if (attempt != 0 && attempt != t.status.attempt) return std::nullopt;
    if (!t.status.terminal()) {
      if (EndPulling(&t, reason)) {
        ended_.notify_all();
      } else {
        BeginStop(&t, grace_ms < 0 ? options_.default_grace_ms : grace_ms, reason, false);
      }
    }
    out = t.status;
  }
  Wake();
  return out;
}

std::vector<std::string> TaskRunner::FailDevices(const std::string& owner,
                                                 const std::vector<std::string>& uuids,
                                                 const std::string& reason,
                                                 const std::string& tenant) {
  return FailIf(
      owner,
      [&](const TaskSpec& spec) {
        if (!tenant.empty() && spec.tenant != tenant) return false;
        for (const DeviceGrant& g : spec.devices) {
          if (std::find(uuids.begin(), uuids.end(), g.uuid) != uuids.end()) return true;
        }
        return false;
      },
      reason);
}

std::vector<std::string> TaskRunner::FailIf(const std::string& owner,
                                            const std::function<bool(const TaskSpec&)>& hit,
                                            const std::string& reason) {
  std::vector<std::string> failed;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, t] : tasks_) {
      if (t->status.owner != owner || t->status.terminal()) continue;
      if (!hit(t->spec)) continue;
      t->fault_reason = reason;
      BeginStop(t.get(), 0, reason, false);
      failed.push_back(id);
    }
  }
  Wake();
  return failed;
}

bool TaskRunner::EndPulling(Task* t, const std::string& reason) {
  // REQUIRES: mu_ held. Nothing of the task runs yet: it ends now, and its GPU with it, rather
  // than when the pull returns (a slow registry can take minutes). The pull thread, finding the
  // task no longer pulling, gives back what it prepared (RunContainer); the pull itself runs on
  // for the store, bounded by the store's tool timeouts, and leaves the image cached.
  if (!t->pulling) return false;
  t->stop_requested = true;
  FinishUnstarted(t, TaskPhase::kCancelled, 0, reason, nullptr);
  LogInfo("agent.runner", "stopped while its image was pulling",
          {{"task", t->spec.task_id}, {"reason", reason}});
  return true;
}

void TaskRunner::BeginStop(Task* t, int64_t grace_ms, const std::string& reason,
                           bool runtime_exceeded) {
  const int64_t deadline = options_.clock->MonotonicMicros() + grace_ms * 1000;
  if (t->stop_requested) {
    t->kill_deadline = std::min(t->kill_deadline, deadline);  // a shorter grace wins
    return;
  }
  t->stop_requested = true;
  t->runtime_exceeded = runtime_exceeded;
  t->status.reason = reason;
  t->kill_deadline = deadline;
  if (t->pulling) return;  // no process yet: the pull thread ends it when the pull returns
  kill(-t->pid, SIGTERM);
  LogInfo("agent.runner", "stopping task",
          {{"task", t->spec.task_id}, {"reason", reason}, {"grace_ms", std::to_string(grace_ms)}});
}

void TaskRunner::Finish(Task* t, std::vector<std::pair<Listener, TaskStatus>>* out) {
  if (t->pidfd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, t->pidfd, nullptr);
    close(t->pidfd);
    t->pidfd = -1;
  }
  kill(-t->pid, SIGKILL);  // whatever is left of the group
  if (options_.lease_keeper) options_.lease_keeper->Untrack(t->pid);
  TaskStatus& st = t->status;
  // An adopted task's leader ended without a word: it was SIGKILLed with its group (the lease
  // keeper at the lease deadline, or a person), and nothing recorded how its program ended.
  bool unrecorded = false;
  if (t->kind == TaskKind::kRecorded) {
    // The recorder's file says how the program itself ended.
    if (std::optional<int> ws = ReadRecordedStatus(t->dir + "/exit_status")) {
      t->wait_status = *ws;
    } else if (t->adopted) {
      t->wait_status = SIGKILL;
      unrecorded = true;
    }
  }
  if (t->guarded) {
    std::vector<std::string> uuids;
    for (const DeviceGrant& d : t->spec.devices) uuids.push_back(d.uuid);
    options_.device_guard->Ended(t->spec.tenant, uuids);
    t->guarded = false;
  }
  if (!t->slice_key.empty()) {
    // What the task's ledger measured: the spill the ledger bills (docs/billing.md).
    st.usage.spill_mib_seconds = options_.slices->Stop(t->slice_key);
    t->slice_key.clear();
  }
  std::string runtime_error;  // an image task's runtime could not run its container
  if (t->container) {
    // The shim's result file says how the container's init ended and whether the kernel's OOM
    // killer struck in its memory cgroup (launcher.h); a shim killed by a stop wrote none.
    auto result = oci::Launcher::ReadResult(t->dir + "/result.json");
    if (result.ok()) {
      st.usage.measured = true;
      st.usage.oom_kills = result->oom_kills;
      st.usage.cpu_usec = result->cpu_usec;
      st.usage.peak_memory_bytes = result->peak_memory_bytes;
      if (result->signal != 0) {
        t->wait_status = result->signal;  // as waitpid reports a death by that signal
      } else if (result->exit_code >= 0) {
        t->wait_status = (result->exit_code & 0xff) << 8;
      }
      if (result->shim_exit_code() == 125) runtime_error = result->reason;
    }
    to_release_.push_back(std::move(t->container));
  }
  const int ws = t->wait_status;
  st.output_tail = ReadTail(t->dir + "/output.log", options_.tail_bytes);
  if (WIFEXITED(ws)) st.exit_code = WEXITSTATUS(ws);
  if (WIFSIGNALED(ws)) st.signal = WTERMSIG(ws);
  if (!t->violation.empty()) {
    st.phase = TaskPhase::kFailed;
    st.reason = t->violation;
  } else if (!t->fault_reason.empty()) {
    st.phase = TaskPhase::kFailed;
    st.reason = t->fault_reason;
    st.device_fault = true;
  } else if (t->runtime_exceeded) {
    st.phase = TaskPhase::kFailed;
    st.reason = "max runtime exceeded";
  } else if (t->stop_requested) {
    st.phase = TaskPhase::kCancelled;
  } else if (WIFEXITED(ws) && st.exit_code == 0) {
    st.phase = TaskPhase::kSucceeded;
  } else if (!runtime_error.empty()) {
    st.phase = TaskPhase::kFailed;
    st.reason = "container runtime: " + runtime_error;
    // A program that does not exist is 127, as a shell (and every launcher before) reports it.
    if (runtime_error.find("exec: ") != std::string::npos &&
        (runtime_error.find("executable file not found") != std::string::npos ||
         runtime_error.find("no such file or directory") != std::string::npos)) {
      st.exit_code = 127;
    }
  } else if (unrecorded) {
    st.phase = TaskPhase::kFailed;
    st.reason =
        "killed by signal 9 (SIGKILL) while no agent process watched it; how its program ended "
        "was not recorded";
  } else {
    st.phase = TaskPhase::kFailed;
    st.reason = st.signal ? std::string("killed by signal ") + std::to_string(st.signal) + " (SIG" +
                                sigabbrev_np(st.signal) + ")"
                          : "exit code " + std::to_string(st.exit_code);
    if (st.usage.measured) {
      // The container's cgroup knows (read by its shim): no guessing.
      st.oom = st.usage.oom_kills > 0 || LooksLikeOom(st.output_tail);
      if (st.usage.oom_kills > 0) {
        st.reason = "out of memory: killed by the kernel at the task's memory limit (" +
                    std::to_string(t->spec.memory_mib > 0 || !options_.sandbox
                                       ? t->spec.memory_mib
                                       : options_.sandbox->options().default_memory_mib) +
                    " MiB); " + st.reason;
      }
    } else {
      // An unexplained SIGKILL is most often the kernel's OOM killer.
      st.oom = st.signal == SIGKILL || LooksLikeOom(st.output_tail);
    }
  }
  std::ofstream(t->dir + "/state", std::ios::app)
      << FormatTaskOutcome(st.phase, st.exit_code, st.signal, st.oom, st.reason);
  LogInfo("agent.runner", "task ended",
          {{"task", st.task_id},
           {"state", TaskPhaseName(st.phase)},
           {"exit_code", std::to_string(st.exit_code)},
           {"signal", std::to_string(st.signal)},
           {"reason", st.reason}});
  finished_order_.push_back(st.task_id);
  Deliver(st, out);
}

void TaskRunner::Forget() {
  while (finished_order_.size() > options_.keep_finished) {
    auto it = tasks_.find(finished_order_.front());
    if (it != tasks_.end() && it->second->status.terminal()) tasks_.erase(it);
    finished_order_.erase(finished_order_.begin());
  }
}

void TaskRunner::Loop() {
  std::vector<epoll_event> events(64);
  while (true) {
    int timeout_ms = 1000;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      const int64_t now = options_.clock->MonotonicMicros();
      for (auto& [id, t] : tasks_) {
        if (t->status.terminal() || t->pulling) continue;
        int64_t next = INT64_MAX;
        if (t->runtime_deadline && !t->stop_requested) next = t->runtime_deadline;
        if (t->kill_deadline && !t->sent_kill) next = std::min(next, t->kill_deadline);
        if (t->pidfd < 0 || t->reaped) next = std::min(next, now + kPollMicros);
        if (next != INT64_MAX) {
          timeout_ms =
              std::min<int64_t>(timeout_ms, std::max<int64_t>(0, (next - now + 999) / 1000));
        }
      }
    }
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    std::vector<std::pair<Listener, TaskStatus>> notify;
    std::vector<std::unique_ptr<oci::PreparedContainer>> released;
    bool finished = false;  // StopAll() waits for ends, listened to or not
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == 0) {
          uint64_t v = 0;
          [[maybe_unused]] ssize_t r = read(wake_fd_, &v, sizeof(v));
        }
      }
      const int64_t now = options_.clock->MonotonicMicros();
      for (auto& [id, tp] : tasks_) {
        Task* t = tp.get();
        if (t->status.terminal() || t->pulling) continue;
        if (!t->reaped && t->adopted) {
          // Not our child: its pidfd turns readable when it has exited (its parent reaps it).
          pollfd p{t->pidfd, POLLIN, 0};
          const bool gone =
              t->pidfd >= 0 ? poll(&p, 1, 0) > 0 : ProcessStartTicks(t->pid) != t->leader_start;
          if (gone) {
            t->reaped = true;
            if (t->pidfd >= 0) {
              epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, t->pidfd, nullptr);
              close(t->pidfd);
              t->pidfd = -1;
            }
          }
        } else if (!t->reaped) {
          int ws = 0;
          const pid_t r = waitpid(t->pid, &ws, WNOHANG);
          if (r == t->pid) {
            t->reaped = true;
            t->wait_status = ws;
            if (t->pidfd >= 0) {
              epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, t->pidfd, nullptr);
              close(t->pidfd);
              t->pidfd = -1;
            }
          }
        }
        if (!t->stop_requested && t->runtime_deadline && now >= t->runtime_deadline) {
          BeginStop(t, options_.default_grace_ms, "max runtime exceeded", true);
        }
        if (t->stop_requested && !t->sent_kill && now >= t->kill_deadline) {
          kill(-t->pid, SIGKILL);
          t->sent_kill = true;
        }
        if (!t->reaped) continue;
        // The leader is gone. A stopping task waits for its group until the grace ends.
        if (t->stop_requested && !t->sent_kill && GroupAlive(t->pid)) continue;
        Finish(t, &notify);
        finished = true;
      }
      Forget();
      released.swap(to_release_);
    }
    // runc delete and unmounts take a while: never under mu_.
    released.clear();
    // Listeners first: whoever waits in StopAll() then finds the final updates already handed on.
    for (auto& [fn, st] : notify) fn(st);
    if (finished || !notify.empty()) {
      std::lock_guard lock(mu_);
      ended_.notify_all();
    }
  }
}

namespace {

// True when process `pid` has GPUPOOL_TASK_ID=<task_id> in its environment.
bool CarriesTask(pid_t pid, const std::string& task_id) {
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const std::string want = "GPUPOOL_TASK_ID=" + task_id;
  // A process in the middle of an exec (a shell exec'ing the real program) shows an empty
  // environment until the kernel has set up the new image: look again before deciding.
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::ifstream env(path, std::ios::binary);
    if (!env) return false;  // gone
    std::string var;
    bool any = false;
    while (std::getline(env, var, '\0')) {
      any = true;
      if (var == want) return true;
    }
    if (any) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

}  // namespace

namespace {

// Why a task of this kind, with these resources, cannot be rebuilt by a restarted agent; "" when
// it can. Each is a resource the agent holds in memory only (a uid lease, a ledger or daemon
// process it runs, a network namespace, a mounted root file system).
std::string NotAdoptable(const TaskRecord& r, bool containers_on, bool slices_on, bool mps_on) {
  switch (r.kind) {
    case TaskKind::kPlain:
      return "started without a recorder (an older agent)";
    case TaskKind::kSandboxed:
      return "it runs in the hand-written sandbox of an older agent, which this one replaced with "
             "the OCI runtime";
    case TaskKind::kContainer:
      if (!containers_on) return "it is a container and images are off now";
      break;
    case TaskKind::kRecorded:
      break;
  }
  if (!r.slice_key.empty() && !slices_on) return "it has a GPU slice and slices are off now";
  if (r.mps && !mps_on) return "it is an MPS client and MPS is off now";
  if (r.isolated_network && r.network_slot < 0) return "its isolated network was not recorded";
  return "";
}

// Kills a task a previous agent process left running, identified by its record.
bool KillLeftover(const TaskRecord& r) {
  if (!r.cgroups.empty()) {
    // An older agent's sandboxed task: its cgroup holds exactly its processes.
    bool alive = false;
    for (const std::string& d : r.cgroups) {
      std::ifstream procs(d + "/cgroup.procs");
      pid_t p = 0;
      if (procs >> p) alive = true;
    }
    sandbox::KillAndRemoveGroups(r.cgroups);
    return alive;
  }
  const bool same = r.leader_start != 0 ? ProcessStartTicks(r.pid) == r.leader_start
                                        : CarriesTask(r.pid, r.spec.task_id);
  return same && kill(-r.pid, SIGKILL) == 0;
}

}  // namespace

TaskRunner::Recovery TaskRunner::Recover(const std::string& owner, int64_t report_within_ms) {
  Recovery out;
  std::vector<std::pair<Listener, TaskStatus>> notify;
  std::error_code ec;
  const auto now_file = std::filesystem::file_time_type::clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir + "/tasks", ec)) {
    Result<TaskRecord> read = ReadTaskRecord(entry.path().string());
    if (!read.ok()) continue;
    TaskRecord& r = *read;
    if (r.orphan_killed) continue;
    if (r.spec.owner.empty()) r.spec.owner = owner;  // written by an agent before owners
    {
      std::lock_guard lock(mu_);
      auto it = tasks_.find(r.spec.task_id);
      if (it != tasks_.end() && it->second->status.attempt >= r.spec.attempt) continue;  // ours
    }
    const std::string dir = entry.path().string();
    if (r.phase) {
      // Recorded as ended by the previous process; report it again while that is recent.
      const auto age = now_file - std::filesystem::last_write_time(entry.path() / "state", ec);
      if (ec || r.spec.owner != owner ||
          std::chrono::duration_cast<std::chrono::milliseconds>(age).count() >= report_within_ms) {
        continue;
      }
      auto task = std::make_unique<Task>();
      task->spec = r.spec;
      task->dir = dir;
      task->reaped = true;
      TaskStatus& st = task->status;
      st = StatusOf(r.spec);
      st.pid = r.pid;
      st.phase = *r.phase;
      st.exit_code = r.exit_code;
      st.signal = r.signal;
      st.oom = r.oom;
      st.reason = r.reason;
      st.output_tail = ReadTail(dir + "/output.log", options_.tail_bytes);
      std::lock_guard lock(mu_);
      Task* t = Insert(std::move(task));
      finished_order_.push_back(t->spec.task_id);
      Deliver(t->status, &notify);
      ++out.reported;
      continue;
    }
    const bool alive = r.leader_start != 0 && ProcessStartTicks(r.pid) == r.leader_start;
    std::string why = r.spec.owner != owner
                          ? "it belongs to node " + r.spec.owner
                          : NotAdoptable(r, options_.containers != nullptr,
                                         options_.slices != nullptr, options_.mps != nullptr);
    std::unique_ptr<oci::PreparedContainer> container;
    if (why.empty() && alive && r.kind == TaskKind::kContainer) {
      // Its uid reserved again, its image held, its root file system known: released as a
      // started container's would be once its shim ends.
      oci::AdoptedContainer a;
      a.id = r.container;
      a.tenant = r.spec.tenant;
      a.task_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
      a.manifest_digest = r.image_digest;
      a.uid = r.uid;
      a.tenant_uid = r.mps;
      a.overlay = r.rootfs_overlay;
      a.network_slot = r.network_slot;
      a.published = r.published;
      auto adopted = options_.containers->Adopt(a);
      if (adopted.ok()) {
        container = std::move(adopted).value();
        out.kept_containers.push_back(r.container);
        out.kept_dirs.push_back(a.task_dir);
        if (r.network_slot >= 0) out.kept_network_slots.push_back(r.network_slot);
      } else {
        why = adopted.status().message();
      }
    }
    if (why.empty() && alive && r.mps) {
      // Its clients' daemons, left running by the previous agent process.
      if (Status st = options_.mps->Adopt(r.spec); !st.ok()) why = st.message();
    }
    std::string slice_dir;
    if (why.empty() && alive && !r.slice_key.empty()) {
      // Its ledger listens again where its processes reconnect, from the same grant, and takes
      // back what they held (docs/interposer.md, "Agent restarts").
      const std::string abs_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
      slice_dir = abs_dir + "/ledger";
      auto started = options_.slices->Start(r.slice_key, slice_dir, r.spec);
      if (!started.ok()) {
        why = started.status().message();
        container.reset();
      }
    }
    if (!why.empty() && (alive || r.leader_start == 0)) {
      if (KillLeftover(r)) {
        ++out.killed;
        LogWarn("agent.runner", "killed a task left running by a previous agent process",
                {{"task", r.spec.task_id}, {"pgid", std::to_string(r.pid)}, {"why", why}});
      }
      std::ofstream(entry.path() / "state", std::ios::app) << "phase=ORPHAN_KILLED\n";
      continue;
    }
    if (!why.empty()) continue;
    // Re-adopt: supervised from here on as if started here; a leader already gone is finished
    // at once from the recorder's file.
    auto task = std::make_unique<Task>();
    task->spec = r.spec;
    task->dir = dir;
    task->kind = r.kind;
    task->adopted = true;
    task->leader_start = r.leader_start;
    task->started_unix_ms = r.started_unix_ms;
    task->container = std::move(container);
    if (!slice_dir.empty()) {
      task->slice_key = r.slice_key;
      task->slice_dir = slice_dir;
    }
    TaskStatus& st = task->status;
    st = StatusOf(r.spec);
    st.pid = r.pid;
    st.phase = TaskPhase::kRunning;
    st.endpoints = EndpointsOf(*task);
    std::vector<std::string> uuids;
    for (const DeviceGrant& d : r.spec.devices) uuids.push_back(d.uuid);
    std::lock_guard lock(mu_);
    Task* t = Insert(std::move(task));
    t->pid = r.pid;
    if (!alive) {
      t->reaped = true;
      Finish(t, &notify);
      ++out.ended;
      LogInfo("agent.runner", "a task ended while no agent process watched it",
              {{"task", r.spec.task_id},
               {"state", TaskPhaseName(t->status.phase)},
               {"exit_code", std::to_string(t->status.exit_code)}});
      continue;
    }
    if (options_.lease_keeper) options_.lease_keeper->Track(r.pid);
    if (options_.device_guard && !uuids.empty()) {
      options_.device_guard->Adopted(r.spec.tenant, uuids);
      t->guarded = true;
    }
    if (r.spec.max_runtime_ms > 0) {
      const int64_t ran_ms = options_.clock->NowMicros() / 1000 - r.started_unix_ms;
      t->runtime_deadline =
          options_.clock->MonotonicMicros() + (r.spec.max_runtime_ms - ran_ms) * 1000;
    }
    WatchPid(t, r.pid);
    if (!t->slice_key.empty()) options_.slices->Watch(t->slice_key, r.pid);
    ++out.adopted;
    LogInfo("agent.runner", "re-adopted a task left running by a previous agent process",
            {{"task", r.spec.task_id},
             {"attempt", std::to_string(r.spec.attempt)},
             {"pid", std::to_string(r.pid)}});
  }
  {
    std::lock_guard lock(mu_);
    Forget();
  }
  Wake();
  for (auto& [fn, st] : notify) fn(st);
  return out;
}

void TaskRunner::Leave() {
  std::lock_guard lock(mu_);
  leaving_ = true;
  // MPS clients left running keep their control daemons (MpsManager::Leave).
  for (const auto& [id, t] : tasks_) {
    if (options_.mps && !t->status.terminal() && MpsManager::Serves(t->spec)) {
      options_.mps->Leave();
      break;
    }
  }
}

std::string TaskRunner::WhyNotAdoptable(const std::string& task_id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return "not on this node";
  const Task& t = *it->second;
  if (t.pulling) return "its image is still being pulled";
  return NotAdoptable(RecordOf(t), options_.containers != nullptr, options_.slices != nullptr,
                      options_.mps != nullptr);
}

std::optional<TaskStatus> TaskRunner::Get(const std::string& task_id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) return std::nullopt;
  return it->second->status;
}

std::vector<TaskStatus> TaskRunner::Running(const std::string& owner) const {
  std::lock_guard lock(mu_);
  std::vector<TaskStatus> out;
  for (const auto& [id, t] : tasks_) {
    if (t->status.owner == owner && !t->status.terminal()) out.push_back(t->status);
  }
  return out;
}

void TaskRunner::StopAll(const std::string& owner, int64_t grace_ms, const std::string& reason) {
  std::unique_lock lock(mu_);
  std::vector<TaskStatus> ended;  // stopped while pulling: told to the listener below
  for (auto& [id, t] : tasks_) {
    if (t->status.owner != owner || t->status.terminal()) continue;
    if (EndPulling(t.get(), reason)) {
      ended.push_back(t->status);
    } else {
      BeginStop(t.get(), grace_ms, reason, false);
    }
  }
  if (auto l = listeners_.find(owner); l != listeners_.end() && !ended.empty()) {
    const Listener listener = l->second;
    lock.unlock();
    for (const TaskStatus& st : ended) listener(st);
    lock.lock();
  }
  Wake();
  ended_.wait(lock, [&] {
    for (const auto& [id, t] : tasks_) {
      if (t->status.owner == owner && !t->status.terminal()) return false;
    }
    return true;
  });
}

Result<LogSlice> TaskRunner::ReadLog(const std::string& task_id, int64_t offset,
                                     int64_t max_bytes) const {
  std::string path;
  bool ended = false;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(task_id);
    if (it == tasks_.end()) return Status::NotFound("task " + task_id + ": not on this node");
    path = it->second->dir + "/output.log";
    ended = it->second->status.terminal();
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::NotFound("task " + task_id + ": no log (" + std::strerror(errno) + ")");
  struct stat st {};
  fstat(fd, &st);
  const int64_t size = st.st_size;
  LogSlice slice;
  slice.offset = offset < 0 ? std::max<int64_t>(0, size + offset) : std::min(offset, size);
  const int64_t len = std::clamp<int64_t>(size - slice.offset, 0, std::max<int64_t>(0, max_bytes));
  slice.data.resize(static_cast<size_t>(len));
  const ssize_t n = pread(fd, slice.data.data(), slice.data.size(), slice.offset);
  close(fd);
  slice.data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  slice.eof = ended && slice.offset + static_cast<int64_t>(slice.data.size()) >= size;
  return slice;
}

}  // namespace gpupool::agent
