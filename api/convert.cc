#include "api/convert.h"

#include <string>

#include "pool/image_reference.h"
#include "pool/volumes.h"
#include "scheduler/registry_credentials.h"

namespace gpupool::api {
namespace {

std::string Got(int64_t v) { return ", got " + std::to_string(v); }

// A positive quantity no larger than `max` (`max_text` says it in people's words).
Status CheckPositive(int64_t v, int64_t max, std::string_view max_text, std::string_view field) {
  if (v <= 0) return Invalid(field, "must be > 0" + Got(v));
  if (v > max) return Invalid(field, "must be at most " + std::string(max_text) + Got(v));
  return Status::Ok();
}

Status CheckNonNegative(int64_t v, int64_t max, std::string_view max_text, std::string_view field) {
  if (v < 0) return Invalid(field, "must be >= 0" + Got(v));
  if (v > max) return Invalid(field, "must be at most " + std::string(max_text) + Got(v));
  return Status::Ok();
}

Status CheckEnvKey(const std::string& key, std::string_view field) {
  bool ok = !key.empty() && !(key[0] >= '0' && key[0] <= '9');
  for (char c : key) {
    ok = ok &&
         ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (!ok) return Invalid(field, "key '" + key + "' must match [A-Za-z_][A-Za-z0-9_]*");
  if (key.starts_with("GPUPOOL_") || key == "CUDA_VISIBLE_DEVICES" ||
      key.starts_with("CUDA_MPS_")) {
    return Invalid(field, "key '" + key + "' is set by the scheduler and may not be overridden");
  }
  return Status::Ok();
}

Status CheckLabels(const google::protobuf::Map<std::string, std::string>& labels,
                   std::string_view field) {
  if (labels.size() > 64) return Invalid(field, "at most 64 labels" + Got(labels.size()));
  for (const auto& [k, v] : labels) {
    if (k.empty() || k.size() > 128) {
      return Invalid(field, "key '" + k + "' must be 1 to 128 characters");
    }
    if (v.size() > 1024) return Invalid(field, "value of '" + k + "' longer than 1024 characters");
  }
  return Status::Ok();
}

Result<ResourceRequest> RequestFromProto(const v1::ResourceRequest& in, std::string_view field) {
  ResourceRequest r;
  switch (in.shape_case()) {
    case v1::ResourceRequest::kFractional: {
      std::string f = FieldPath(field, "fractional");
      r.shape = RequestShape::kFractional;
      GPUPOOL_RETURN_IF_ERROR(CheckPositive(in.fractional().milli_tflops(),
                                            kMaxMilliTflopsPerDevice, "100000000 (100,000 TFLOPS)",
                                            FieldPath(f, "milli_tflops")));
      GPUPOOL_RETURN_IF_ERROR(CheckPositive(in.fractional().vram_mib(), kMaxVramMibPerDevice,
                                            "16777216 (16 TiB)", FieldPath(f, "vram_mib")));
      r.fractional = {in.fractional().milli_tflops(), in.fractional().vram_mib()};
      break;
    }
    case v1::ResourceRequest::kWholeGpus: {
      std::string f = FieldPath(field, "whole_gpus");
      r.shape = RequestShape::kWholeGpus;
      GPUPOOL_RETURN_IF_ERROR(
          CheckRange(in.whole_gpus().count(), 1, kMaxWholeGpus, FieldPath(f, "count")));
      r.gpu_count = in.whole_gpus().count();
      for (int i = 0; i < in.whole_gpus().models_size(); ++i) {
        const std::string& m = in.whole_gpus().models(i);
        if (m.empty() || m.size() > 128) {
          return Invalid(FieldPath(f, "models[" + std::to_string(i) + "]"),
                         "must be a catalog model name of 1 to 128 characters");
        }
        r.models.push_back(m);
      }
      break;
    }
    case v1::ResourceRequest::kMig: {
      r.shape = RequestShape::kMig;
      const std::string& p = in.mig().profile();
      bool ok = !p.empty() && p.size() <= 32;
      for (char c : p) {
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '+');
      }
      if (!ok) {
        return Invalid(FieldPath(field, "mig.profile"),
                       "must be a MIG profile name like 1g.10gb, got '" + p + "'");
      }
      r.mig_profile = p;
      break;
    }
    case v1::ResourceRequest::kSku:
      r.shape = RequestShape::kSku;
      GPUPOOL_RETURN_IF_ERROR(ValidateName(in.sku().name(), FieldPath(field, "sku.name")));
      r.sku = in.sku().name();
      break;
    case v1::ResourceRequest::SHAPE_NOT_SET:
      return Invalid(field, "exactly one of fractional, whole_gpus, mig, sku must be set");
  }
  GPUPOOL_RETURN_IF_ERROR(CheckNonNegative(in.cpu_milli(), kMaxCpuMilli, "4096000 (4096 cores)",
                                           FieldPath(field, "cpu_milli")));
  GPUPOOL_RETURN_IF_ERROR(CheckNonNegative(in.memory_mib(), kMaxHostMemoryMib, "67108864 (64 TiB)",
                                           FieldPath(field, "memory_mib")));
  r.cpu_milli = in.cpu_milli();
  r.memory_mib = in.memory_mib();
  return r;
}

// entrypoint, working_dir and volumes: what only a container has, so each requires `image`.
Status ContainerFieldsFromProto(const v1::TaskTemplate& in, std::string_view field,
                                TaskTemplate* t) {
  const auto needs_image = [&](std::string_view name) {
    return Invalid(FieldPath(field, name), "needs image (a plain command runs on the node's root)");
  };
  if (in.entrypoint_size() > 0) {
    const std::string ep_field = FieldPath(field, "entrypoint");
    if (t->image.empty()) return needs_image("entrypoint");
    if (in.entrypoint(0).empty()) return Invalid(ep_field + "[0]", "the program must not be empty");
    if (in.entrypoint_size() + in.command_size() > 4096) {
      return Invalid(ep_field, "at most 4096 arguments with command");
    }
    size_t bytes = 0;
    for (const std::string& arg : in.entrypoint()) bytes += arg.size();
    if (bytes > 256 * 1024) return Invalid(ep_field, "exceeds 256 KiB");
    t->entrypoint.assign(in.entrypoint().begin(), in.entrypoint().end());
  }
  if (!in.working_dir().empty()) {
    const std::string& wd = in.working_dir();
    if (t->image.empty()) return needs_image("working_dir");
    if (wd != "/") {
      Status st = CheckVolumeMountPath(wd);
      if (!st.ok()) return Invalid(FieldPath(field, "working_dir"), st.message());
    }
    t->working_dir = wd;
  }
  if (in.volumes_size() > 0) {
    const std::string vol_field = FieldPath(field, "volumes");
    if (t->image.empty()) return needs_image("volumes");
    if (in.volumes_size() > kMaxVolumes) {
      return Invalid(vol_field, "at most " + std::to_string(kMaxVolumes) + " volumes");
    }
    for (int i = 0; i < in.volumes_size(); ++i) {
      const v1::Volume& v = in.volumes(i);
      const std::string at = vol_field + "[" + std::to_string(i) + "]";
      Status st = CheckVolumeMountPath(v.mount_path());
      if (!st.ok()) return Invalid(at + ".mount_path", st.message());
      if (!v.dataset().empty()) {
        st = CheckDatasetName(v.dataset());
        if (!st.ok()) return Invalid(at + ".dataset", st.message());
      }
      if (!t->volumes.emplace(v.mount_path(), v.dataset()).second) {
        return Invalid(at + ".mount_path", "'" + v.mount_path() + "' is mounted twice");
      }
    }
    // One inside another would be hidden by it, or need a mount point in a read-only dataset.
    for (const auto& [outer, unused] : t->volumes) {
      for (const auto& [path, dataset] : t->volumes) {
        if (path.size() > outer.size() && path.compare(0, outer.size() + 1, outer + "/") == 0) {
          return Invalid(vol_field, "'" + path + "' is inside volume '" + outer + "'");
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TaskTemplate> TaskTemplateFromProto(const v1::TaskTemplate& in, std::string_view field) {
  TaskTemplate t;
  if (!in.image().empty()) {
    // Refused here, naming the part that is wrong, rather than failing on every node later.
    Result<ImageReference> ref = ParseImageReference(in.image());
    if (!ref.ok()) return Invalid(FieldPath(field, "image"), ref.status().message());
    t.image = in.image();
  }
  std::string cmd_field = FieldPath(field, "command");
  // An image brings its own entrypoint and Cmd; a plain command must name its program.
  if (in.command_size() == 0 && t.image.empty()) {
    return Invalid(cmd_field, "must not be empty (or set image)");
  }
  if (in.command_size() > 0 && in.command(0).empty()) {
    return Invalid(cmd_field + "[0]", "the program must not be empty");
  }
  if (in.command_size() > 4096) return Invalid(cmd_field, "at most 4096 arguments");
  size_t bytes = 0;
  for (const std::string& arg : in.command()) {
    bytes += arg.size();
    t.command.push_back(arg);
  }
  std::string env_field = FieldPath(field, "env");
  if (in.env_size() > 1024) return Invalid(env_field, "at most 1024 variables");
  for (const auto& [k, v] : in.env()) {
    GPUPOOL_RETURN_IF_ERROR(CheckEnvKey(k, env_field));
    bytes += k.size() + v.size();
    t.env.emplace(k, v);
  }
  std::string secret_field = FieldPath(field, "secret_env");
  if (in.env_size() + in.secret_env_size() > 1024) {
    return Invalid(secret_field, "at most 1024 variables with env");
  }
  for (const auto& [k, v] : in.secret_env()) {
    GPUPOOL_RETURN_IF_ERROR(CheckEnvKey(k, secret_field));
    // Names only in messages: the value is a secret.
    if (t.env.count(k) != 0) return Invalid(secret_field, "'" + k + "' is also in env");
    bytes += k.size() + v.size();
    t.secret_env.emplace(k, v);
  }
  if (bytes > 1024 * 1024) return Invalid(field, "command and env exceed 1 MiB");
  if (!in.registry_credential().empty()) {
    // Only names in messages: the value is a secret.
    const std::string cred_field = FieldPath(field, "registry_credential");
    if (t.image.empty()) return Invalid(cred_field, "needs image (a plain command pulls nothing)");
    auto it = t.secret_env.find(in.registry_credential());
    if (it == t.secret_env.end()) {
      // Else the name of a credential the tenant keeps (scheduler/registry_credentials.h); the
      // service checks that it has one.
      if (!CheckRegistryCredentialName(in.registry_credential(), cred_field).ok()) {
        return Invalid(cred_field, "'" + in.registry_credential() +
                                       "' is not the name of a secret_env entry, nor a registry "
                                       "credential's name ([a-z0-9._-])");
      }
    } else if (const size_t colon = it->second.find(':');
               colon == std::string::npos || colon == 0) {
      return Invalid(cred_field, "the value of secret_env '" + in.registry_credential() +
                                     "' must be USERNAME:PASSWORD");
    }
    t.registry_credential = in.registry_credential();
  }
  GPUPOOL_RETURN_IF_ERROR(ContainerFieldsFromProto(in, field, &t));
  GPUPOOL_ASSIGN_OR_RETURN(t.ports, PortsFromProto(in.ports(), FieldPath(field, "ports")));
  if (!in.has_resources()) {
    return Invalid(FieldPath(field, "resources"),
                   "exactly one of fractional, whole_gpus, mig, sku must be set");
  }
  GPUPOOL_ASSIGN_OR_RETURN(t.resources,
                           RequestFromProto(in.resources(), FieldPath(field, "resources")));
  return t;
}

void SetTimestamp(int64_t micros, google::protobuf::Timestamp* ts) {
  ts->set_seconds(micros / 1'000'000);
  ts->set_nanos(static_cast<int32_t>((micros % 1'000'000) * 1000));
}

// ---- Jobs ----

Result<JobSpec> JobSpecFromProto(const v1::JobSpec& in, std::string_view field) {
  JobSpec s;
  GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(in.tenant(), FieldPath(field, "tenant")));
  s.tenant = in.tenant();
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.pool(), FieldPath(field, "pool")));
  s.pool = in.pool();
  if (!in.priority_class().empty()) {
    GPUPOOL_RETURN_IF_ERROR(ValidateName(in.priority_class(), FieldPath(field, "priority_class")));
  }
  s.priority_class = in.priority_class();
  GPUPOOL_RETURN_IF_ERROR(
      CheckRange(in.task_count(), 1, kMaxTaskCount, FieldPath(field, "task_count")));
  s.task_count = in.task_count();
  s.gang = in.gang();
  s.preemptible = in.preemptible();
  if (in.has_max_runtime()) {
    const auto& d = in.max_runtime();
    std::string f = FieldPath(field, "max_runtime");
    if (d.seconds() < 0 || d.nanos() < 0 || d.nanos() >= 1'000'000'000) {
      return Invalid(f, "must be a non-negative duration");
    }
    if (d.seconds() > kMaxRuntimeMs / 1000) {
      return Invalid(f, "must be at most 366 days, got " + std::to_string(d.seconds()) + "s");
    }
    s.max_runtime_ms = d.seconds() * 1000 + d.nanos() / 1'000'000;
    if (s.max_runtime_ms == 0 && (d.seconds() != 0 || d.nanos() != 0)) s.max_runtime_ms = 1;
  }
  GPUPOOL_RETURN_IF_ERROR(CheckLabels(in.labels(), FieldPath(field, "labels")));
  s.labels.insert(in.labels().begin(), in.labels().end());
  if (!in.has_template_()) {
    return Invalid(FieldPath(field, "template"), "must be set (command and resources)");
  }
  GPUPOOL_ASSIGN_OR_RETURN(s.task_template,
                           TaskTemplateFromProto(in.template_(), FieldPath(field, "template")));
  GPUPOOL_RETURN_IF_ERROR(
      CheckRange(in.max_retries(), 0, kMaxRetries, FieldPath(field, "max_retries")));
  s.max_retries = in.max_retries();
  return s;
}

Result<JobFilter> JobFilterFromProto(const v1::ListJobsRequest& req) {
  JobFilter f;
  if (!req.tenant().empty()) GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(req.tenant(), "tenant"));
  f.tenant = req.tenant();
  if (!req.pool().empty()) GPUPOOL_RETURN_IF_ERROR(ValidateName(req.pool(), "pool"));
  f.pool = req.pool();
  if (req.state() != v1::JOB_STATE_UNSPECIFIED) {
    std::optional<JobState> st = FromProto(req.state());
    if (!st) return Invalid("state", "unknown value " + std::to_string(req.state()));
    f.state = st;
  }
  GPUPOOL_RETURN_IF_ERROR(CheckRange(req.page_size(), 0, kMaxPageSize, "page_size"));
  f.limit = req.page_size() == 0 ? kDefaultPageSize : req.page_size();
  GPUPOOL_ASSIGN_OR_RETURN(f.after_id, DecodePageToken(req.page_token()));
  return f;
}

void ToProto(const JobSpec& s, v1::JobSpec* out) {
  out->set_tenant(s.tenant);
  out->set_pool(s.pool);
  out->set_priority_class(s.priority_class);
  out->set_task_count(s.task_count);
  out->set_gang(s.gang);
  out->set_preemptible(s.preemptible);
  if (s.max_runtime_ms > 0) {
    out->mutable_max_runtime()->set_seconds(s.max_runtime_ms / 1000);
    out->mutable_max_runtime()->set_nanos(static_cast<int32_t>(s.max_runtime_ms % 1000) *
                                          1'000'000);
  }
  out->mutable_labels()->insert(s.labels.begin(), s.labels.end());
  out->set_max_retries(s.max_retries);
  ToProto(s.task_template, out->mutable_template_());
}

void ToProto(const TaskTemplate& in, v1::TaskTemplate* t) {
  for (const std::string& a : in.command) t->add_command(a);
  t->set_image(in.image);
  t->set_registry_credential(in.registry_credential);  // a name, not the secret
  for (const std::string& a : in.entrypoint) t->add_entrypoint(a);
  t->set_working_dir(in.working_dir);
  VolumesToProto(in.volumes, t->mutable_volumes());
  PortsToProto(in.ports, t->mutable_ports());
  t->mutable_env()->insert(in.env.begin(), in.env.end());
  // Secret values never leave the server through the API: the names show what was set.
  for (const auto& [k, v] : in.secret_env) (*t->mutable_secret_env())[k] = kRedacted;
  ToProto(in.resources, t->mutable_resources());
}

void ToProto(const ResourceRequest& r, v1::ResourceRequest* rr) {
  switch (r.shape) {
    case RequestShape::kFractional:
      rr->mutable_fractional()->set_milli_tflops(r.fractional.milli_tflops);
      rr->mutable_fractional()->set_vram_mib(r.fractional.vram_mib);
      break;
    case RequestShape::kWholeGpus:
      rr->mutable_whole_gpus()->set_count(r.gpu_count);
      for (const std::string& m : r.models) rr->mutable_whole_gpus()->add_models(m);
      break;
    case RequestShape::kMig:
      rr->mutable_mig()->set_profile(r.mig_profile);
      break;
    case RequestShape::kSku:
      rr->mutable_sku()->set_name(r.sku);
      break;
  }
  rr->set_cpu_milli(r.cpu_milli);
  rr->set_memory_mib(r.memory_mib);
}

void ToProto(const TaskRecord& t, v1::Task* out) {
  out->set_id(TaskId(t.job_id, t.index));
  out->set_index(t.index);
  out->set_state(ToProto(t.state));
  out->set_node(t.node);
  for (const Allocation& a : t.allocations) {
    v1::Allocation* pa = out->add_allocations();
    pa->set_device_id(a.device_id);
    pa->set_milli_tflops(a.amount.milli_tflops);
    pa->set_vram_mib(a.amount.vram_mib);
    pa->set_slots(a.slots);
    pa->set_exclusive(a.exclusive);
  }
  out->set_attempt(t.attempt);
  out->set_exit_code(t.exit_code);
  out->set_reason(t.reason);
  if (t.scheduled_us > 0) SetTimestamp(t.scheduled_us, out->mutable_scheduled_time());
  if (t.started_us > 0) SetTimestamp(t.started_us, out->mutable_start_time());
  if (t.finished_us > 0) SetTimestamp(t.finished_us, out->mutable_finish_time());
  static_assert(
      static_cast<int>(PendingCode::kMissingCapability) == v1::PendingReason::MISSING_CAPABILITY,
      "PendingCode and PendingReason.Code number their values alike");
  if (t.state == TaskState::kPending && t.pending.code != PendingCode::kNone) {
    v1::PendingReason* p = out->mutable_pending();
    p->set_code(static_cast<v1::PendingReason::Code>(static_cast<int>(t.pending.code)));
    p->set_binding(t.pending.binding);
    for (const auto& [why, nodes] : t.pending.nodes_by_reason) {
      (*p->mutable_nodes_by_reason())[why] += nodes;
    }
  }
  if (!t.preempted_by.empty()) {
    out->mutable_last_preemption()->set_by_task(
        TaskId(t.preempted_by.job_id, t.preempted_by.index));
    out->mutable_last_preemption()->set_rule(std::string(ToString(t.preempted_by.rule)));
  }
  if (t.Pulling()) {
    out->set_state(v1::TASK_STATE_PULLING);
    v1::PullProgress* p = out->mutable_pull();
    p->set_image(t.pull.image);
    p->set_bytes_done(t.pull.bytes_done);
    p->set_bytes_total(t.pull.bytes_total);
  }
  if (t.state == TaskState::kRunning) EndpointsToProto(t.endpoints, out->mutable_endpoints());
  if (t.usage != TaskUsageRecord{}) {
    v1::TaskUsage* u = out->mutable_usage();
    u->set_cpu_usage_us(t.usage.cpu_usage_us);
    u->set_peak_memory_bytes(t.usage.peak_memory_bytes);
    u->set_oom_kills(t.usage.oom_kills);
    u->set_spill_mib_seconds(t.usage.spill_mib_seconds);
  }
}

void ToProto(const JobRecord& j, v1::Job* out) {
  out->set_id(std::to_string(j.id));
  ToProto(j.spec, out->mutable_spec());
  out->set_state(ToProto(j.state));
  out->set_reason(j.reason);
  if (j.submit_us > 0) SetTimestamp(j.submit_us, out->mutable_submit_time());
  if (j.finish_us > 0) SetTimestamp(j.finish_us, out->mutable_finish_time());
  for (const TaskRecord& t : j.tasks) ToProto(t, out->add_tasks());
  out->set_submitted_by(j.spec.submitted_by);
  if (j.spec.service_id != 0) {
    out->set_service_id(std::to_string(j.spec.service_id));
    out->set_service_generation(j.spec.service_generation);
  }
}

void ToProto(const JobChange& c, v1::JobEvent* out) {
  ToProto(c.job, out->mutable_job());
  out->set_message(c.message);
  if (c.time_us > 0) SetTimestamp(c.time_us, out->mutable_time());
}

v1::JobState ToProto(JobState s) {
  switch (s) {
    case JobState::kPending:
      return v1::JOB_STATE_PENDING;
    case JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
    case JobState::kCancelling:
      return v1::JOB_STATE_CANCELLING;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

v1::TaskState ToProto(TaskState s) {
  switch (s) {
    case TaskState::kPending:
      return v1::TASK_STATE_PENDING;
    case TaskState::kScheduled:
      return v1::TASK_STATE_SCHEDULED;
    case TaskState::kRunning:
      return v1::TASK_STATE_RUNNING;
    case TaskState::kSucceeded:
      return v1::TASK_STATE_SUCCEEDED;
    case TaskState::kFailed:
      return v1::TASK_STATE_FAILED;
    case TaskState::kCancelled:
      return v1::TASK_STATE_CANCELLED;
    case TaskState::kPreempted:
      return v1::TASK_STATE_PREEMPTED;
    case TaskState::kLost:
      return v1::TASK_STATE_LOST;
  }
  return v1::TASK_STATE_UNSPECIFIED;
}

std::optional<JobState> FromProto(v1::JobState s) {
  if (s >= v1::JOB_STATE_PENDING && s <= v1::JOB_STATE_CANCELLING) {
    return static_cast<JobState>(static_cast<int>(s));
  }
  return std::nullopt;
}

std::optional<TaskState> FromProto(v1::TaskState s) {
  if (s >= v1::TASK_STATE_PENDING && s <= v1::TASK_STATE_LOST) {
    return static_cast<TaskState>(static_cast<int>(s));
  }
  return std::nullopt;
}

Result<std::vector<TaskPort>> PortsFromProto(const google::protobuf::RepeatedPtrField<v1::Port>& in,
                                             std::string_view field) {
  std::vector<TaskPort> ports;
  if (in.size() > kMaxTaskPorts) {
    return Invalid(field, "at most " + std::to_string(kMaxTaskPorts) + " ports, got " +
                              std::to_string(in.size()));
  }
  for (int i = 0; i < in.size(); ++i) {
    const v1::Port& p = in.Get(i);
    if (p.port() < 1 || p.port() > 65535) {
      return Invalid(std::string(field) + "[" + std::to_string(i) + "].port",
                     "must be 1..65535, got " + std::to_string(p.port()));
    }
    TaskPort port;
    port.name = p.name();
    port.port = static_cast<int>(p.port());
    port.protocol = p.protocol().empty() ? "tcp" : p.protocol();
    ports.push_back(std::move(port));
  }
  GPUPOOL_RETURN_IF_ERROR(CheckTaskPorts(ports, std::string(field)));
  return ports;
}

void PortsToProto(const std::vector<TaskPort>& ports,
                  google::protobuf::RepeatedPtrField<v1::Port>* out) {
  for (const TaskPort& p : ports) {
    v1::Port* o = out->Add();
    o->set_port(static_cast<uint32_t>(p.port));
    o->set_protocol(p.protocol);
    o->set_name(p.name);
  }
}

void EndpointsToProto(const std::vector<TaskEndpoint>& endpoints,
                      google::protobuf::RepeatedPtrField<v1::Endpoint>* out) {
  for (const TaskEndpoint& e : endpoints) {
    v1::Endpoint* o = out->Add();
    o->set_name(e.port.name);
    o->set_port(static_cast<uint32_t>(e.port.port));
    o->set_protocol(e.port.protocol);
    o->set_host(e.host);
    o->set_host_port(static_cast<uint32_t>(e.host_port));
  }
}

void VolumesToProto(const std::map<std::string, std::string>& volumes,
                    google::protobuf::RepeatedPtrField<v1::Volume>* out) {
  for (const auto& [path, dataset] : volumes) {
    v1::Volume* v = out->Add();
    v->set_mount_path(path);
    v->set_dataset(dataset);
  }
}

}  // namespace gpupool::api
