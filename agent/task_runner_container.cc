// TaskRunner's image tasks: pulled on a thread of their own, then run as an OCI container through
// the shim (task_runner.h, "Images"; agent/oci/container.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "agent/interposer/ledger/protocol.h"
#include "agent/mps/mps_manager.h"
#include "agent/oci/container.h"
#include "agent/sandbox/sandbox.h"
#include "agent/scrub/device_guard.h"
#include "agent/slices/slice_ledgers.h"
#include "agent/task_runner.h"
#include "agent/task_runner_task.h"
#include "agent/task_spawn.h"
#include "base/log.h"

namespace gpupool::agent {

Result<TaskStatus> TaskRunner::StartContainer(const TaskSpec& spec) {
  // REQUIRES: start_mu_ held (Start). Threads of pulls that ended are joined here, so they do
  // not pile up on a long-lived agent.
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = pulls_.erase(it);
    } else {
      ++it;
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<Task> task, NewTask(spec));
  TaskStatus& st = task->status;
  // Not started until the container's program runs (ReportWhenStarted): held as "pulling", which
  // gpupoold shows as SCHEDULED; a plain command has nothing to pull and reports no progress.
  st.phase = TaskPhase::kPulling;
  st.reason = spec.image.empty() ? "starting" : "pulling image " + spec.image;
  task->pulling = true;
  std::lock_guard lock(mu_);
  Task* t = Insert(std::move(task));
  if (!options_.containers) {
    FinishUnstarted(t, TaskPhase::kFailed, 126, options_.containers_off, nullptr);
    Forget();
    return t->status;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  pulls_.push_back({std::thread([this, done, id = spec.task_id, attempt = spec.attempt] {
                      RunContainer(id, attempt);
                      done->store(true);
                    }),
                    done});
  if (!spec.image.empty()) {
    LogInfo(
        "agent.runner", "pulling image",
        {{"task", spec.task_id}, {"attempt", std::to_string(spec.attempt)}, {"image", spec.image}});
  }
  return t->status;
}

void TaskRunner::RunContainer(const std::string& id, int32_t attempt) {
  TaskSpec spec;
  std::string dir;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second->status.attempt != attempt) return;
    spec = it->second->spec;
    dir = it->second->dir;
  }
  std::error_code ec;
  const std::string abs_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
  oci::ContainerRequest req;
  req.id = AttemptName(spec.owner, spec.task_id, spec.attempt);
  req.tenant = spec.tenant;
  req.task_dir = abs_dir;
  req.image = spec.image;
  req.credential = {spec.registry_username, spec.registry_password};
  req.args = spec.argv;
  req.entrypoint = spec.entrypoint;
  req.working_dir = spec.working_dir;
  req.task_volumes = spec.volumes;
  // The sandbox's defaults, as for a task it launches itself (sandbox.h).
  const sandbox::SandboxOptions box =
      options_.sandbox ? options_.sandbox->options() : sandbox::SandboxOptions{};
  req.memory_bytes = (spec.memory_mib > 0 ? spec.memory_mib : box.default_memory_mib) << 20;
  req.pids_max = box.pids_max;
  req.cpu_milli = spec.cpu_milli;
  req.device_files = spec.device_files;
  req.gpu = !spec.devices.empty();
  // An image brings no driver; a plain command's host directories already hold it.
  if (!spec.image.empty()) req.driver_files = spec.driver_files;
  req.tenant_uid = options_.mps != nullptr && MpsManager::Serves(spec);
  req.network = spec.network.value_or(options_.default_network);
  req.ports = spec.ports;
  req.on_pull_progress = [this, id, attempt, image = spec.image,
                          last = std::chrono::steady_clock::time_point{}](int64_t done,
                                                                          int64_t total) mutable {
    // A pull that fetches nothing (every blob cached) has no progress to show.
    if (total <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < kPullReportInterval) return;
    last = now;
    ReportPull(id, attempt, image, done, total);
  };
  // The task's env over the image's, then the grant's (GrantEnv): what a plain command gets.
  std::map<std::string, std::string> env = spec.env;
  for (const auto& [k, v] : GrantEnv(spec)) env[k] = v;

  std::string error = PortsRefused(spec);
  std::string slice_key;
  bool guarded = false;
  std::vector<std::string> uuids;
  for (const DeviceGrant& d : spec.devices) uuids.push_back(d.uuid);
  if (error.empty() && options_.slices && SliceLedgers::Shared(spec)) {
    // The slice's ledger, its socket directory bound read-only at the same path in the container
    // and the interposer preloaded there (agent/oci/spec.h).
    auto slice_env = options_.slices->Start(req.id, abs_dir + "/ledger", spec);
    if (slice_env.ok()) {
      slice_key = req.id;
      req.interposer_library = options_.slices->library();
      req.interposer_socket = (*slice_env)[ledger::kSocketEnv];
    } else {
      error = slice_env.status().message();
    }
  }
  if (error.empty() && options_.mps) {
    auto mps_env = options_.mps->Prepare(spec);
    if (mps_env.ok()) {
      for (const auto& [k, v] : *mps_env) {
        env[k] = v;
        // The daemon's pipe directory, where the task's CUDA reaches its MPS server.
        if (k == "CUDA_MPS_PIPE_DIRECTORY") req.volumes.push_back({v, v, false});
      }
    } else {
      error = mps_env.status().message();
    }
  }
  for (const auto& [k, v] : env) req.env.push_back(k + "=" + v);
  if (error.empty() && options_.device_guard) {
    const Status guard = options_.device_guard->BeforeStart(spec.tenant, uuids);
    if (guard.ok()) {
      guarded = true;
    } else {
      error = guard.message();
    }
  }
  std::unique_ptr<oci::PreparedContainer> prepared;
  double prepare_ms = 0;  // pull (or cache hit), uid, rootfs, bundle: for the log
  if (error.empty()) {
    const auto prepare_start = std::chrono::steady_clock::now();
    auto p = options_.containers->Prepare(req);
    prepare_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - prepare_start)
            .count();
    if (p.ok()) {
      prepared = std::move(p).value();
    } else {
      error = p.status().message();  // "image: …", "uid: …", "rootfs: …", "spec: …"
    }
  }

  std::vector<std::pair<Listener, TaskStatus>> notify;
  std::unique_ptr<oci::PreparedContainer> unused;
  pid_t shim = 0;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    Task* t = it == tasks_.end() ? nullptr : it->second.get();
    if (t == nullptr || t->status.attempt != attempt || !t->pulling) {
      // Cannot happen (a pulling task is neither forgotten nor restarted); give back what was
      // taken all the same.
      if (guarded) options_.device_guard->Ended(spec.tenant, uuids);
      if (!slice_key.empty()) options_.slices->Stop(slice_key);
      unused = std::move(prepared);
    } else {
      t->guarded = guarded;
      t->slice_key = slice_key;
      t->slice_dir = slice_key.empty() ? "" : abs_dir + "/ledger";
      t->container = std::move(prepared);
      if (!error.empty()) {
        FinishUnstarted(t, TaskPhase::kFailed, 126, error, &notify);
      } else if (stopping_) {
        FinishUnstarted(t, TaskPhase::kCancelled, 0, "the agent is shutting down", &notify);
      } else if (t->stop_requested) {
        // Stopped (or its device failed) while it pulled: it never ran.
        const bool fault = !t->fault_reason.empty();
        t->status.device_fault = fault;
        FinishUnstarted(t, fault ? TaskPhase::kFailed : TaskPhase::kCancelled, 0,
                        fault ? t->fault_reason : t->status.reason, &notify);
      } else {
        const std::string log_path = t->dir + "/output.log";
        const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        Result<pid_t> pid =
            Status::Internal("cannot open " + log_path + ": " + std::strerror(errno));
        if (log_fd >= 0) {
          // The shim's environment names the task (GPUPOOL_TASK_ID), for operators.
          pid = SpawnProcessGroup(
              t->container->ShimArgv(),
              {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "GPUPOOL_TASK_ID=" + spec.task_id},
              t->dir, log_fd);
          close(log_fd);
        }
        if (!pid.ok()) {
          FinishUnstarted(t, TaskPhase::kFailed, 126, "container shim: " + pid.status().message(),
                          &notify);
        } else {
          t->pulling = false;
          t->status.reason.clear();
          Supervise(t, *pid);
          shim = *pid;
          LogInfo("agent.runner", "container started",
                  {{"task", id},
                   {"attempt", std::to_string(attempt)},
                   {"image", spec.image},
                   {"shim_pid", std::to_string(*pid)},
                   {"prepare_ms", std::to_string(prepare_ms)}});
        }
      }
      Forget();
    }
  }
  Wake();
  unused.reset();
  for (auto& [fn, st] : notify) fn(st);
  if (!notify.empty()) {
    std::lock_guard lock(mu_);
    ended_.notify_all();
  }
  if (shim > 0) ReportWhenStarted(id, attempt, dir + "/" + oci::kStartedMarker);
}

void TaskRunner::ReportPull(const std::string& id, int32_t attempt, const std::string& image,
                            int64_t done, int64_t total) {
  std::pair<Listener, TaskStatus> pulling;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (stopping_ || it == tasks_.end() || it->second->status.attempt != attempt ||
        !it->second->pulling) {
      return;
    }
    TaskStatus& st = it->second->status;
    st.pull_image = image;
    st.pull_bytes_done = done;
    st.pull_bytes_total = total;
    auto l = listeners_.find(st.owner);
    if (l == listeners_.end()) return;
    pulling = {l->second, st};
  }
  pulling.first(pulling.second);
}

void TaskRunner::ReportWhenStarted(const std::string& id, int32_t attempt,
                                   const std::string& marker) {
  // RUNNING means the container's program runs: the shim creates the marker once `runc start`
  // returned (a few ms after the shim's own start). A task that ends first reports only its end.
  const auto since = std::chrono::steady_clock::now();
  for (;;) {
    const bool started = access(marker.c_str(), F_OK) == 0;
    std::pair<Listener, TaskStatus> running;
    TaskStartTiming timing{true, false, 0};
    {
      std::lock_guard lock(mu_);
      auto it = tasks_.find(id);
      if (stopping_ || it == tasks_.end() || it->second->status.attempt != attempt ||
          it->second->status.terminal()) {
        return;
      }
      if (started) {
        const Task& t = *it->second;
        timing.image = !t.spec.image.empty();  // a plain command runs in a container too
        timing.cache_hit = timing.image && t.container != nullptr && t.container->image_cache_hit();
        timing.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t.accepted).count();
        auto l = listeners_.find(t.status.owner);
        if (l == listeners_.end()) return;
        running = {l->second, t.status};
      }
    }
    if (started) {
      LogInfo("agent.runner", "container running",
              {{"task", id},
               {"runtime_ms", std::to_string(std::chrono::duration<double, std::milli>(
                                                 std::chrono::steady_clock::now() - since)
                                                 .count())}});
      if (options_.on_start) options_.on_start(timing);
      return running.first(running.second);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace gpupool::agent
