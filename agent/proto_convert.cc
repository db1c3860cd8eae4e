#include "agent/proto_convert.h"

#include <algorithm>

namespace gpupool::agent {

void ToProto(const Device& d, v1::DeviceInfo* out) {
  out->set_uuid(d.uuid);
  out->set_model(d.model);
  out->set_index(d.index);
  out->set_vram_mib(d.vram_mib);
  out->set_milli_tflops(d.milli_tflops);
  out->set_mig_profile(d.mig_profile);
  out->set_parent_uuid(d.parent_uuid);
  out->set_healthy(d.healthy);
  out->set_numa_node(d.numa_node);
  out->set_time_slice_slots(d.time_slice_slots);
  out->set_mig_start(d.mig_start);
  out->set_mig_enabled(d.mig_enabled);
}

void ToProto(const Link& l, v1::DeviceLink* out) {
  out->set_a(l.a);
  out->set_b(l.b);
  switch (l.kind) {
    case LinkKind::kNvlink:
      out->set_kind(v1::LINK_KIND_NVLINK);
      break;
    case LinkKind::kPcieSwitch:
      out->set_kind(v1::LINK_KIND_PCIE_SWITCH);
      break;
    case LinkKind::kPcieHost:
      out->set_kind(v1::LINK_KIND_PCIE_HOST);
      break;
    case LinkKind::kSystem:
      out->set_kind(v1::LINK_KIND_SYSTEM);
      break;
  }
  out->set_bandwidth_gbps(l.bandwidth_gbps);
}

void ToProto(const DeviceSample& s, v1::DeviceMetrics* out) {
  out->set_uuid(s.uuid);
  out->set_utilization_pct(s.utilization_pct);
  out->set_memory_used_mib(s.memory_used_mib);
  out->set_power_watts(s.power_watts);
  out->set_temperature_c(s.temperature_c);
  out->set_ecc_errors(s.ecc_errors);
  out->set_xid_errors(s.xid_errors);
  out->set_healthy(s.healthy);
  out->set_last_xid(s.last_xid);
  out->set_mps_daemons(s.mps_daemons);
}

void ToProto(const TaskStatus& t, v1::RunningTask* out) {
  out->set_task_id(t.task_id);
  out->set_attempt(t.attempt);
  out->set_pid(t.pid);
}

v1::TaskState ToProto(TaskPhase phase) {
  switch (phase) {
    case TaskPhase::kRunning:
      return v1::TASK_STATE_RUNNING;
    case TaskPhase::kSucceeded:
      return v1::TASK_STATE_SUCCEEDED;
    case TaskPhase::kFailed:
      return v1::TASK_STATE_FAILED;
    case TaskPhase::kCancelled:
      return v1::TASK_STATE_CANCELLED;
    case TaskPhase::kPulling:
      // Progress only (with TaskUpdate.pull): the scheduler still holds the task SCHEDULED.
      return v1::TASK_STATE_PULLING;
  }
  return v1::TASK_STATE_UNSPECIFIED;
}

bool IsTerminal(v1::TaskState state) {
  return state == v1::TASK_STATE_SUCCEEDED || state == v1::TASK_STATE_FAILED ||
         state == v1::TASK_STATE_CANCELLED || state == v1::TASK_STATE_PREEMPTED ||
         state == v1::TASK_STATE_LOST;
}

void ToProto(const TaskStatus& t, int64_t epoch, v1::TaskUpdate* out) {
  out->Clear();
  out->set_task_id(t.task_id);
  out->set_attempt(t.attempt);
  out->set_state(ToProto(t.phase));
  out->set_exit_code(t.exit_code);
  out->set_signal(t.signal);
  out->set_oom(t.oom);
  out->set_output_tail(t.output_tail);
  out->set_reason(t.reason);
  out->set_epoch(epoch);
  out->set_cpu_usage_us(t.usage.cpu_usec);
  out->set_peak_memory_bytes(t.usage.peak_memory_bytes);
  out->set_oom_kills(t.usage.oom_kills);
  out->set_spill_mib_seconds(t.usage.spill_mib_seconds);
  out->set_device_fault(t.device_fault);
  if (t.phase == TaskPhase::kPulling) {
    out->mutable_pull()->set_image(t.pull_image);
    out->mutable_pull()->set_bytes_done(t.pull_bytes_done);
    out->mutable_pull()->set_bytes_total(t.pull_bytes_total);
  }
  if (t.phase == TaskPhase::kRunning) {
    for (const TaskEndpoint& e : t.endpoints) {
      v1::Endpoint* o = out->add_endpoints();
      o->set_name(e.port.name);
      o->set_port(static_cast<uint32_t>(e.port.port));
      o->set_protocol(e.port.protocol);
      o->set_host(e.host);
      o->set_host_port(static_cast<uint32_t>(e.host_port));
    }
  }
}

TaskSpec FromProto(const v1::StartTask& s, const std::string& owner, const Inventory& inventory) {
  TaskSpec spec;
  spec.owner = owner;
  spec.task_id = s.task_id();
  spec.job_id = s.job_id();
  spec.tenant = s.tenant();
  spec.attempt = s.attempt();
  spec.argv.assign(s.argv().begin(), s.argv().end());
  for (const auto& [k, v] : s.env()) spec.env[k] = v;
  spec.max_runtime_ms = s.max_runtime_ms();
  spec.cpu_milli = s.cpu_milli();
  spec.memory_mib = s.memory_mib();
  spec.mps_tenant_isolation = s.mps_tenant_isolation();
  spec.compute_fair = s.compute_fair();
  spec.image = s.image();
  spec.entrypoint.assign(s.entrypoint().begin(), s.entrypoint().end());
  spec.working_dir = s.working_dir();
  for (const v1::Volume& v : s.volumes()) spec.volumes[v.mount_path()] = v.dataset();
  // Checked where they are published (net::TaskNetworks::Prepare); gpupoold checked them first.
  for (const v1::Port& p : s.ports()) {
    spec.ports.push_back({p.name(), p.port() > 65536 ? 65536 : static_cast<int>(p.port()),
                          p.protocol().empty() ? "tcp" : p.protocol()});
  }
  // The pull credential goes to the image store only: out of the task's environment.
  if (auto cred = spec.env.find(s.registry_credential_env());
      !s.registry_credential_env().empty() && cred != spec.env.end()) {
    const size_t colon = cred->second.find(':');
    spec.registry_username = cred->second.substr(0, colon);
    spec.registry_password = colon == std::string::npos ? "" : cred->second.substr(colon + 1);
    spec.env.erase(cred);
  }
  switch (s.network()) {
    case v1::NETWORK_MODE_NONE:
      spec.network = net::NetworkMode::kNone;
      break;
    case v1::NETWORK_MODE_ISOLATED:
      spec.network = net::NetworkMode::kIsolated;
      break;
    case v1::NETWORK_MODE_HOST:
      spec.network = net::NetworkMode::kHost;
      break;
    case v1::NETWORK_MODE_UNSPECIFIED:
      break;  // the node's default
    default:  // a mode of a newer server: the most confined one, never a more open one
      spec.network = net::NetworkMode::kNone;
      break;
  }
  for (const v1::DeviceGrant& g : s.devices()) {
    DeviceGrant d;
    d.uuid = g.uuid();
    d.milli_tflops = g.milli_tflops();
    d.vram_mib = g.vram_mib();
    d.thread_percentage = g.thread_percentage();
    auto dev = std::find_if(inventory.devices.begin(), inventory.devices.end(),
                            [&](const Device& x) { return x.uuid == d.uuid; });
    if (dev != inventory.devices.end()) {
      d.device_milli_tflops = dev->milli_tflops;
      d.device_vram_mib = dev->vram_mib;
      for (const std::string& f : dev->device_files) {
        if (std::find(spec.device_files.begin(), spec.device_files.end(), f) ==
            spec.device_files.end()) {
          spec.device_files.push_back(f);
        }
      }
    }
    if (d.thread_percentage <= 0) {
      d.thread_percentage = 100;
      if (dev != inventory.devices.end() && dev->milli_tflops > 0 && d.milli_tflops > 0) {
        const int64_t pct = (d.milli_tflops * 100 + dev->milli_tflops - 1) / dev->milli_tflops;
        d.thread_percentage = static_cast<int32_t>(std::clamp<int64_t>(pct, 1, 100));
      }
    }
    spec.devices.push_back(d);
  }
  if (!spec.devices.empty()) {
    spec.device_files.insert(spec.device_files.end(), inventory.control_device_files.begin(),
                             inventory.control_device_files.end());
    spec.driver_files = inventory.driver_files;
  }
  return spec;
}

}  // namespace gpupool::agent
