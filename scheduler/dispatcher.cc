// Dispatcher (dispatcher.h).
#include "scheduler/dispatcher.h"

#include <algorithm>

#include "base/log.h"

namespace gpupool {

int32_t MpsThreadPercentage(int64_t granted_milli_tflops, int64_t device_milli_tflops,
                            bool exclusive) {
  if (exclusive || device_milli_tflops <= 0) return 100;
  int64_t pct = (granted_milli_tflops * 100 + device_milli_tflops - 1) / device_milli_tflops;
  return static_cast<int32_t>(std::clamp<int64_t>(pct, 1, 100));
}

StartTaskCommand Dispatcher::BuildStart(const JobEntry& job, int32_t index, const NodeRecord* node,
                                        int64_t epoch, const PoolRecord* pool) {
  const TaskRecord& t = job.task(index).rec;
  const JobSpec& spec = job.head.spec;
  StartTaskCommand cmd;
  cmd.task_id = TaskId(job.id(), index);
  cmd.job_id = job.id();
  cmd.tenant = spec.tenant;
  cmd.attempt = t.attempt;
  cmd.argv = spec.task_template.command;
  cmd.image = spec.task_template.image;
  cmd.registry_credential_env = spec.task_template.registry_credential;
  cmd.entrypoint = spec.task_template.entrypoint;
  cmd.working_dir = spec.task_template.working_dir;
  cmd.volumes = spec.task_template.volumes;
  cmd.ports = spec.task_template.ports;
  cmd.env = spec.task_template.env;
  for (const auto& [k, v] : spec.task_template.secret_env) cmd.env[k] = v;  // only to the agent
  cmd.max_runtime_ms = spec.max_runtime_ms;
  cmd.epoch = epoch;
  cmd.cpu_milli = spec.task_template.resources.cpu_milli;
  cmd.memory_mib = spec.task_template.resources.memory_mib;
  cmd.mps_tenant_isolation = pool != nullptr && pool->mps_tenant_isolation;
  cmd.compute_fair = pool != nullptr && pool->compute_fair;
  if (pool != nullptr) cmd.network = pool->network;
  for (const Allocation& a : t.allocations) {
    int64_t device_tflops = 0;
    if (node != nullptr) {
      auto d = std::find_if(node->devices.begin(), node->devices.end(),
                            [&](const DeviceRecord& r) { return r.id == a.device_id; });
      if (d != node->devices.end()) device_tflops = d->physical.milli_tflops;
    }
    cmd.devices.push_back(
        DeviceGrantCommand{a.device_id, a.amount.milli_tflops, a.amount.vram_mib,
                           MpsThreadPercentage(a.amount.milli_tflops, device_tflops, a.exclusive)});
  }
  return cmd;
}

StopTaskCommand Dispatcher::BuildStop(const JobEntry& job, int32_t index,
                                      const std::string& reason) const {
  return StopTaskCommand{TaskId(job.id(), index), job.task(index).rec.attempt, grace_ms_, reason,
                         epoch_};
}

void Dispatcher::Start(const JobEntry& job, int32_t index) {
  const std::string& node = job.task(index).rec.node;
  StartTaskCommand cmd =
      BuildStart(job, index, nodes_(node), epoch_, pools_ ? pools_(job.head.spec.pool) : nullptr);
  if (!agents_->StartTask(node, cmd)) {
    LogWarn("core", "agent not connected; start deferred to reconnect",
            {{"task", cmd.task_id}, {"node", node}});
  }
}

void Dispatcher::Stop(const JobEntry& job, int32_t index, const std::string& reason) {
  agents_->StopTask(job.task(index).rec.node, BuildStop(job, index, reason));
}

int Dispatcher::PinImages(const PoolRecord& pool, const std::set<std::string>& nodes) {
  const PinImagesCommand cmd{pool.pinned_images, epoch_};
  int sent = 0;
  for (const std::string& node : nodes) sent += agents_->PinImages(node, cmd) ? 1 : 0;
  return sent;
}

bool Dispatcher::SetMigLayout(const MigLayoutRecord& row) {
  return agents_->SetMigLayout(row.node,
                               MigLayoutCommand{row.gpu, row.layout, row.generation, epoch_});
}

}  // namespace gpupool
