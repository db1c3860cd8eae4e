// The agent half of api/convert.h: Register, Heartbeat and TaskUpdate in; RegisterAck,
// StartTask and StopTask out.
#include <algorithm>
#include <set>
#include <string>

#include "api/convert.h"
#include "pool/catalog.h"
#include "pool/image_reference.h"

namespace gpupool::api {
namespace {

std::string Index(std::string_view field, int i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

Status CheckQuantity(int64_t v, int64_t max, std::string_view field) {
  if (v < 0 || v > max) {
    return Invalid(field,
                   "must be between 0 and " + std::to_string(max) + ", got " + std::to_string(v));
  }
  return Status::Ok();
}

Result<DeviceRecord> DeviceFromProto(const v1::DeviceInfo& in, std::string_view field) {
  DeviceRecord d;
  if (in.uuid().empty() || in.uuid().size() > 128) {
    return Invalid(FieldPath(field, "uuid"), "must be 1 to 128 characters");
  }
  d.id = in.uuid();
  if (in.model().size() > 128) return Invalid(FieldPath(field, "model"), "longer than 128");
  d.model = in.model();
  if (in.index() < 0) return Invalid(FieldPath(field, "index"), "must be >= 0");
  d.index = in.index();
  GPUPOOL_RETURN_IF_ERROR(
      CheckQuantity(in.milli_tflops(), kMaxMilliTflopsPerDevice, FieldPath(field, "milli_tflops")));
  GPUPOOL_RETURN_IF_ERROR(
      CheckQuantity(in.vram_mib(), kMaxVramMibPerDevice, FieldPath(field, "vram_mib")));
  d.physical = {in.milli_tflops(), in.vram_mib()};
  d.mig_profile = in.mig_profile();
  d.parent_id = in.parent_uuid();
  if (!d.mig_profile.empty() && d.parent_id.empty()) {
    return Invalid(FieldPath(field, "parent_uuid"), "must be set for a MIG instance");
  }
  d.healthy = in.healthy();
  d.numa_node = in.numa_node();
  if (in.time_slice_slots() < 0 || in.time_slice_slots() > kMaxDeviceSlots) {
    return Invalid(FieldPath(field, "time_slice_slots"),
                   "must be 0.." + std::to_string(kMaxDeviceSlots));
  }
  d.time_slice_slots = in.time_slice_slots();
  if (in.mig_start() < 0 || in.mig_start() >= kMigMemorySlices) {
    return Invalid(FieldPath(field, "mig_start"),
                   "must be 0.." + std::to_string(kMigMemorySlices - 1));
  }
  d.mig_start = d.mig_profile.empty() ? 0 : in.mig_start();
  d.mig_enabled = d.mig_profile.empty() && in.mig_enabled();
  return d;
}

Result<LinkKind> LinkKindFromProto(v1::LinkKind k, std::string_view field) {
  switch (k) {
    case v1::LINK_KIND_NVLINK:
      return LinkKind::kNvlink;
    case v1::LINK_KIND_PCIE_SWITCH:
      return LinkKind::kPcieSwitch;
    case v1::LINK_KIND_PCIE_HOST:
      return LinkKind::kPcieHost;
    case v1::LINK_KIND_UNSPECIFIED:
    case v1::LINK_KIND_SYSTEM:
      return LinkKind::kSystem;
    default:
      return Invalid(field, "unknown value " + std::to_string(static_cast<int>(k)));
  }
}

}  // namespace

Result<AgentRegistration> RegistrationFromProto(const v1::Register& in) {
  AgentRegistration reg;
  NodeRecord& n = reg.node;
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.node_name(), "register.node_name"));
  n.name = in.node_name();
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.pool(), "register.pool"));
  n.pool = in.pool();
  n.labels.insert(in.labels().begin(), in.labels().end());
  GPUPOOL_RETURN_IF_ERROR(CheckQuantity(in.cpu_milli(), kMaxCpuMilli, "register.cpu_milli"));
  GPUPOOL_RETURN_IF_ERROR(CheckQuantity(in.memory_mib(), kMaxHostMemoryMib, "register.memory_mib"));
  GPUPOOL_RETURN_IF_ERROR(
      CheckQuantity(in.spill_budget_mib(), kMaxHostMemoryMib, "register.spill_budget_mib"));
  n.cpu_milli = in.cpu_milli();
  n.memory_mib = in.memory_mib();
  n.spill_budget_mib = in.spill_budget_mib();
  std::set<std::string> uuids;
  std::set<int32_t> indexes;
  for (int i = 0; i < in.devices_size(); ++i) {
    std::string f = Index("register.devices", i);
    GPUPOOL_ASSIGN_OR_RETURN(DeviceRecord d, DeviceFromProto(in.devices(i), f));
    if (!uuids.insert(d.id).second) {
      return Invalid(FieldPath(f, "uuid"), "duplicate device '" + d.id + "'");
    }
    indexes.insert(d.index);
    if (in.devices(i).fault_id() > 0) {
      reg.faults.push_back({d.id, in.devices(i).fault(), in.devices(i).fault_id()});
    }
    n.devices.push_back(std::move(d));
  }
  for (int i = 0; i < in.links_size(); ++i) {
    const v1::DeviceLink& l = in.links(i);
    std::string f = Index("register.links", i);
    if (!indexes.contains(l.a()) || !indexes.contains(l.b())) {
      return Invalid(f, "links devices " + std::to_string(l.a()) + " and " + std::to_string(l.b()) +
                            ", which are not both reported");
    }
    LinkRecord lr;
    lr.a = l.a();
    lr.b = l.b();
    GPUPOOL_ASSIGN_OR_RETURN(lr.kind, LinkKindFromProto(l.kind(), FieldPath(f, "kind")));
    lr.bandwidth_gbps = l.bandwidth_gbps();
    n.links.push_back(lr);
  }
  for (int i = 0; i < in.running_tasks_size(); ++i) {
    const v1::RunningTask& t = in.running_tasks(i);
    GPUPOOL_RETURN_IF_ERROR(
        ValidateTaskId(t.task_id(), FieldPath(Index("register.running_tasks", i), "task_id")));
    reg.running.push_back({t.task_id(), t.attempt()});
  }
  for (const v1::NodeCapability& c : in.capabilities()) {
    reg.capabilities.push_back({c.name(), c.enforced(), c.detail()});
  }
  for (int i = 0; i < in.mig_outcomes_size(); ++i) {
    const v1::MigLayoutOutcome& o = in.mig_outcomes(i);
    if (!uuids.contains(o.gpu_uuid())) {
      return Invalid(FieldPath(Index("register.mig_outcomes", i), "gpu_uuid"),
                     "names no reported device '" + o.gpu_uuid() + "'");
    }
    reg.mig_outcomes.push_back(
        {o.gpu_uuid(), o.generation(), o.error().substr(0, 1024), o.faulted()});
  }
  return reg;
}

std::vector<DeviceHealth> DeviceHealthFromProto(const v1::Heartbeat& hb) {
  std::vector<DeviceHealth> out;
  out.reserve(hb.devices_size());
  for (const v1::DeviceMetrics& m : hb.devices()) {
    DeviceSample s;
    s.utilization_pct = std::clamp(m.utilization_pct(), 0, 100);
    s.memory_used_mib = std::max<int64_t>(0, m.memory_used_mib());
    s.power_watts = std::max(0, m.power_watts());
    s.temperature_c = m.temperature_c();
    s.ecc_errors = std::max<int64_t>(0, m.ecc_errors());
    s.xid_errors = std::max<int64_t>(0, m.xid_errors());
    out.push_back({m.uuid(), m.healthy(), s, {m.uuid(), m.fault(), m.fault_id()}});
  }
  return out;
}

// An image reference as long as ParseImageReference accepts (pool/image_reference.cc).
constexpr size_t kMaxPullImageBytes = 1024;

Result<std::vector<NodeImage>> NodeImagesFromProto(const v1::ImageCache& cache) {
  constexpr int kMaxImages = 4096, kMaxLayers = 1024, kMaxReferences = 64;
  if (cache.images_size() > kMaxImages) {
    return Invalid("image_cache.images", "at most " + std::to_string(kMaxImages));
  }
  std::vector<NodeImage> out;
  out.reserve(static_cast<size_t>(cache.images_size()));
  for (int i = 0; i < cache.images_size(); ++i) {
    const v1::CachedImage& in = cache.images(i);
    const std::string at = "image_cache.images[" + std::to_string(i) + "]";
    if (!IsSha256Digest(in.manifest_digest())) {
      return Invalid(at + ".manifest_digest", "must be sha256:<64 lowercase hex digits>");
    }
    if (in.references_size() > kMaxReferences || in.layers_size() > kMaxLayers) {
      return Invalid(at, "at most " + std::to_string(kMaxReferences) + " references and " +
                             std::to_string(kMaxLayers) + " layers");
    }
    NodeImage image;
    image.manifest_digest = in.manifest_digest();
    for (const std::string& ref : in.references()) {
      if (ref.size() > kMaxPullImageBytes || !ParseImageReference(ref).ok()) {
        return Invalid(at + ".references", "not an image reference");
      }
      image.references.push_back(ref);
    }
    for (const v1::CachedLayer& l : in.layers()) {
      if (!IsSha256Digest(l.digest()) || l.size() < 0) {
        return Invalid(at + ".layers", "a layer needs a sha256 digest and a size >= 0");
      }
      image.layers.emplace_back(l.digest(), l.size());
    }
    out.push_back(std::move(image));
  }
  return out;
}

Result<TaskReport> TaskReportFromProto(const std::string& node, const v1::TaskUpdate& in) {
  TaskReport r;
  r.node = node;
  GPUPOOL_RETURN_IF_ERROR(ValidateTaskId(in.task_id(), "task_update.task_id"));
  r.task_id = in.task_id();
  r.attempt = in.attempt();
  switch (in.state()) {
    case v1::TASK_STATE_RUNNING:
    case v1::TASK_STATE_SUCCEEDED:
    case v1::TASK_STATE_FAILED:
    case v1::TASK_STATE_CANCELLED:
    case v1::TASK_STATE_PREEMPTED:
      r.state = *FromProto(in.state());
      break;
    case v1::TASK_STATE_PULLING: {
      // Progress, not a transition: the core keeps it in memory for the API (docs/images.md).
      const v1::PullProgress& p = in.pull();
      if (p.bytes_done() < 0 || p.bytes_total() < 0 || p.bytes_done() > p.bytes_total()) {
        return Invalid("task_update.pull", "bytes must satisfy 0 <= done <= total, got " +
                                               std::to_string(p.bytes_done()) + " of " +
                                               std::to_string(p.bytes_total()));
      }
      if (p.image().size() > kMaxPullImageBytes) {
        return Invalid("task_update.pull.image",
                       "must be at most " + std::to_string(kMaxPullImageBytes) + " bytes");
      }
      r.state = TaskState::kScheduled;
      r.pull.image = p.image();
      r.pull.bytes_done = p.bytes_done();
      r.pull.bytes_total = p.bytes_total();
      break;
    }
    default:
      return Invalid("task_update.state",
                     "must be RUNNING, SUCCEEDED, FAILED, CANCELLED, PREEMPTED or PULLING, got " +
                         std::to_string(static_cast<int>(in.state())));
  }
  r.exit_code = in.exit_code();
  r.signal = in.signal();
  r.oom = in.oom();
  r.reason = in.reason();
  r.device_fault = in.device_fault();
  if (in.cpu_usage_us() < 0 || in.peak_memory_bytes() < 0 || in.oom_kills() < 0 ||
      in.spill_mib_seconds() < 0) {
    return Invalid("task_update", "usage figures must not be negative");
  }
  r.usage = {in.cpu_usage_us(), in.peak_memory_bytes(), in.oom_kills(), in.spill_mib_seconds()};
  r.lease_expired = in.lease_expired();
  if (in.endpoints_size() > 0) {
    // Where a task's ports are published: shown to its tenant and stored with the task.
    if (r.state != TaskState::kRunning)
      return Invalid("task_update.endpoints", "only with RUNNING");
    if (in.endpoints_size() > kMaxTaskPorts) {
      return Invalid("task_update.endpoints", "at most " + std::to_string(kMaxTaskPorts));
    }
    std::vector<TaskPort> ports;
    for (int i = 0; i < in.endpoints_size(); ++i) {
      const v1::Endpoint& e = in.endpoints(i);
      const std::string at = Index("task_update.endpoints", i);
      if (e.host().empty() || e.host().size() > 253 ||
          e.host().find_first_of(" @\t\n") != std::string::npos) {
        return Invalid(FieldPath(at, "host"), "want a host name or address of 1..253 bytes");
      }
      if (e.host_port() < 1 || e.host_port() > 65535) {
        return Invalid(FieldPath(at, "host_port"), "must be 1..65535");
      }
      TaskEndpoint endpoint;
      endpoint.port.name = e.name();
      endpoint.port.port = e.port() > 65536 ? 65536 : static_cast<int>(e.port());
      endpoint.port.protocol = e.protocol();
      endpoint.host = e.host();
      endpoint.host_port = static_cast<int>(e.host_port());
      ports.push_back(endpoint.port);
      r.endpoints.push_back(std::move(endpoint));
    }
    GPUPOOL_RETURN_IF_ERROR(CheckTaskPorts(ports, "task_update.endpoints"));
  }
  return r;
}

void ToProto(const RegistrationResult& r, v1::RegisterAck* out) {
  out->set_epoch(r.epoch);
  out->set_heartbeat_interval_ms(r.heartbeat_interval_ms);
  for (const std::string& id : r.stop_task_ids) out->add_stop_task_ids(id);
  out->set_lease_ms(r.lease_ms);
  out->set_lease_stop_grace_ms(r.lease_stop_grace_ms);
  for (const std::string& image : r.pinned_images) out->add_pinned_images(image);
}

void ToProto(const PinImagesCommand& c, v1::PinnedImages* out) {
  for (const std::string& image : c.images) out->add_images(image);
  out->set_epoch(c.epoch);
}

void ToProto(const MigLayoutCommand& c, v1::SetMigLayout* out) {
  out->set_gpu_uuid(c.gpu);
  out->set_layout(c.layout);
  out->set_generation(c.generation);
  out->set_epoch(c.epoch);
}

void ToProto(const StartTaskCommand& c, v1::StartTask* out) {
  out->set_task_id(c.task_id);
  out->set_job_id(std::to_string(c.job_id));
  out->set_tenant(c.tenant);
  out->set_attempt(c.attempt);
  for (const std::string& a : c.argv) out->add_argv(a);
  out->mutable_env()->insert(c.env.begin(), c.env.end());
  for (const DeviceGrantCommand& g : c.devices) {
    v1::DeviceGrant* pg = out->add_devices();
    pg->set_uuid(g.uuid);
    pg->set_milli_tflops(g.milli_tflops);
    pg->set_vram_mib(g.vram_mib);
    pg->set_thread_percentage(g.thread_percentage);
  }
  out->set_max_runtime_ms(c.max_runtime_ms);
  out->set_epoch(c.epoch);
  out->set_cpu_milli(c.cpu_milli);
  out->set_memory_mib(c.memory_mib);
  out->set_mps_tenant_isolation(c.mps_tenant_isolation);
  out->set_compute_fair(c.compute_fair);
  out->set_image(c.image);
  out->set_registry_credential_env(c.registry_credential_env);
  for (const std::string& a : c.entrypoint) out->add_entrypoint(a);
  out->set_working_dir(c.working_dir);
  VolumesToProto(c.volumes, out->mutable_volumes());
  PortsToProto(c.ports, out->mutable_ports());
  out->set_network(ToProto(c.network));
}

void ToProto(const StopTaskCommand& c, v1::StopTask* out) {
  out->set_task_id(c.task_id);
  out->set_attempt(c.attempt);
  out->set_grace_period_ms(c.grace_period_ms);
  out->set_reason(c.reason);
  out->set_epoch(c.epoch);
}

}  // namespace gpupool::api
