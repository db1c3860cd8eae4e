#include "api/convert.h"

#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "placement/strategy.h"

namespace gpupool::api {
namespace {

std::string Got(int64_t v) { return ", got " + std::to_string(v); }

Status CheckRange(int64_t v, int64_t lo, int64_t hi, std::string_view field) {
  if (v < lo || v > hi) {
    return Invalid(field,
                   "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + Got(v));
  }
  return Status::Ok();
}

// A positive quantity no larger than `max` (`unit` names what max is in people's words).
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

void SetTime(int64_t micros, google::protobuf::Timestamp* ts) {
  ts->set_seconds(micros / 1'000'000);
  ts->set_nanos(static_cast<int32_t>((micros % 1'000'000) * 1000));
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

Result<TaskTemplate> TemplateFromProto(const v1::JobSpec& spec, std::string_view field) {
  if (!spec.has_template_()) return Invalid(field, "must be set (command and resources)");
  const v1::TaskTemplate& in = spec.template_();
  TaskTemplate t;
  std::string cmd_field = FieldPath(field, "command");
  if (in.command_size() == 0) return Invalid(cmd_field, "must not be empty");
  if (in.command(0).empty()) return Invalid(cmd_field + "[0]", "the program must not be empty");
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
  if (bytes > 1024 * 1024) return Invalid(field, "command and env exceed 1 MiB");
  if (!in.has_resources()) {
    return Invalid(FieldPath(field, "resources"),
                   "exactly one of fractional, whole_gpus, mig, sku must be set");
  }
  GPUPOOL_ASSIGN_OR_RETURN(t.resources,
                           RequestFromProto(in.resources(), FieldPath(field, "resources")));
  return t;
}

Result<Ratio> RatioFromProto(double r, std::string_view field) {
  if (r == 0) return Ratio{};
  if (!std::isfinite(r) || r < kMinOvercommit || r > kMaxOvercommit) {
    std::ostringstream got;
    got << r;
    return Invalid(field, "must be between 1.0 and 10.0 (0 means 1.0), got " + got.str());
  }
  return Ratio::FromDouble(r);
}

Result<Visibility> VisibilityFromProto(v1::Visibility v, std::string_view field) {
  switch (v) {
    case v1::VISIBILITY_UNSPECIFIED:
    case v1::VISIBILITY_PUBLIC:
      return Visibility::kPublic;
    case v1::VISIBILITY_PRIVATE:
      return Visibility::kPrivate;
    default:
      return Invalid(field, "unknown value " + std::to_string(static_cast<int>(v)) +
                                "; use VISIBILITY_PUBLIC or VISIBILITY_PRIVATE");
  }
}

Result<SharingMode> SharingFromProto(v1::SharingMode m, std::string_view field) {
  switch (m) {
    case v1::SHARING_MODE_UNSPECIFIED:
    case v1::SHARING_MODE_FRACTIONAL:
      return SharingMode::kFractional;
    case v1::SHARING_MODE_EXCLUSIVE:
      return SharingMode::kExclusive;
    case v1::SHARING_MODE_TIME_SLICED:
      return SharingMode::kTimeSliced;
    default:
      return Invalid(field, "unknown value " + std::to_string(static_cast<int>(m)) +
                                "; use SHARING_MODE_EXCLUSIVE, SHARING_MODE_FRACTIONAL or "
                                "SHARING_MODE_TIME_SLICED");
  }
}

Result<std::vector<std::string>> TenantsFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& in, std::string_view field) {
  std::vector<std::string> out;
  for (int i = 0; i < in.size(); ++i) {
    GPUPOOL_RETURN_IF_ERROR(
        ValidateTenantPath(in.Get(i), std::string(field) + "[" + std::to_string(i) + "]"));
    out.push_back(in.Get(i));
  }
  return out;
}

Status CheckStrategy(const std::string& name, std::string_view field) {
  if (name.empty()) return Status::Ok();
  Result<placement::Strategy> s = placement::ParseStrategy(name);
  if (!s.ok()) return Invalid(field, s.status().message());
  return Status::Ok();
}

// Cross-field rules of a whole pool record.
Status CheckPoolConsistency(const PoolRecord& p, std::string_view field) {
  if (p.sharing_mode == SharingMode::kTimeSliced) {
    GPUPOOL_RETURN_IF_ERROR(CheckRange(p.time_slice_replicas, kMinReplicas, kMaxReplicas,
                                       FieldPath(field, "time_slice_replicas")));
  } else if (p.time_slice_replicas != 0) {
    return Invalid(
        FieldPath(field, "time_slice_replicas"),
        "only allowed with sharing_mode SHARING_MODE_TIME_SLICED" + Got(p.time_slice_replicas));
  }
  if (p.visibility == Visibility::kPublic && !p.allowed_tenants.empty()) {
    return Invalid(FieldPath(field, "allowed_tenants"),
                   "only allowed with visibility VISIBILITY_PRIVATE");
  }
  return Status::Ok();
}

v1::Visibility ToProto(Visibility v) {
  return v == Visibility::kPrivate ? v1::VISIBILITY_PRIVATE : v1::VISIBILITY_PUBLIC;
}

v1::SharingMode ToProto(SharingMode m) {
  switch (m) {
    case SharingMode::kExclusive:
      return v1::SHARING_MODE_EXCLUSIVE;
    case SharingMode::kFractional:
      return v1::SHARING_MODE_FRACTIONAL;
    case SharingMode::kTimeSliced:
      return v1::SHARING_MODE_TIME_SLICED;
  }
  return v1::SHARING_MODE_UNSPECIFIED;
}

v1::NodeState ToProto(NodeState s) {
  switch (s) {
    case NodeState::kReady:
      return v1::NODE_STATE_READY;
    case NodeState::kNotReady:
      return v1::NODE_STATE_NOT_READY;
    case NodeState::kCordoned:
      return v1::NODE_STATE_CORDONED;
    case NodeState::kDraining:
      return v1::NODE_STATE_DRAINING;
  }
  return v1::NODE_STATE_UNSPECIFIED;
}

void ToProto(const Resources& r, v1::Resources* out) {
  out->set_milli_tflops(r.milli_tflops);
  out->set_vram_mib(r.vram_mib);
}

}  // namespace

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
  GPUPOOL_ASSIGN_OR_RETURN(s.task_template, TemplateFromProto(in, FieldPath(field, "template")));
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
  v1::TaskTemplate* t = out->mutable_template_();
  for (const std::string& a : s.task_template.command) t->add_command(a);
  t->mutable_env()->insert(s.task_template.env.begin(), s.task_template.env.end());
  const ResourceRequest& r = s.task_template.resources;
  v1::ResourceRequest* rr = t->mutable_resources();
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
  }
  out->set_attempt(t.attempt);
  out->set_exit_code(t.exit_code);
  out->set_reason(t.reason);
  if (t.scheduled_us > 0) SetTime(t.scheduled_us, out->mutable_scheduled_time());
  if (t.started_us > 0) SetTime(t.started_us, out->mutable_start_time());
  if (t.finished_us > 0) SetTime(t.finished_us, out->mutable_finish_time());
}

void ToProto(const JobRecord& j, v1::Job* out) {
  out->set_id(std::to_string(j.id));
  ToProto(j.spec, out->mutable_spec());
  out->set_state(ToProto(j.state));
  out->set_reason(j.reason);
  if (j.submit_us > 0) SetTime(j.submit_us, out->mutable_submit_time());
  if (j.finish_us > 0) SetTime(j.finish_us, out->mutable_finish_time());
  for (const TaskRecord& t : j.tasks) ToProto(t, out->add_tasks());
}

void ToProto(const JobChange& c, v1::JobEvent* out) {
  ToProto(c.job, out->mutable_job());
  out->set_message(c.message);
  if (c.time_us > 0) SetTime(c.time_us, out->mutable_time());
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
  if (s >= v1::JOB_STATE_PENDING && s <= v1::JOB_STATE_CANCELLED) {
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

// ---- Pools ----

Result<PoolRecord> PoolFromProto(const v1::Pool& in, std::string_view field) {
  PoolRecord p;
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.name(), FieldPath(field, "name")));
  p.name = in.name();
  GPUPOOL_ASSIGN_OR_RETURN(p.visibility,
                           VisibilityFromProto(in.visibility(), FieldPath(field, "visibility")));
  GPUPOOL_ASSIGN_OR_RETURN(
      p.allowed_tenants,
      TenantsFromProto(in.allowed_tenants(), FieldPath(field, "allowed_tenants")));
  GPUPOOL_RETURN_IF_ERROR(
      CheckStrategy(in.placement_strategy(), FieldPath(field, "placement_strategy")));
  p.placement_strategy = in.placement_strategy();
  GPUPOOL_ASSIGN_OR_RETURN(
      p.compute_overcommit,
      RatioFromProto(in.compute_overcommit(), FieldPath(field, "compute_overcommit")));
  GPUPOOL_ASSIGN_OR_RETURN(
      p.memory_overcommit,
      RatioFromProto(in.memory_overcommit(), FieldPath(field, "memory_overcommit")));
  GPUPOOL_ASSIGN_OR_RETURN(p.sharing_mode,
                           SharingFromProto(in.sharing_mode(), FieldPath(field, "sharing_mode")));
  p.time_slice_replicas = in.time_slice_replicas();
  GPUPOOL_RETURN_IF_ERROR(CheckPoolConsistency(p, field));
  return p;
}

Result<PoolPatch> PoolPatchFromProto(const v1::UpdatePoolRequest& req) {
  const v1::Pool& in = req.pool();
  PoolPatch patch;
  GPUPOOL_RETURN_IF_ERROR(ValidateName(in.name(), "pool.name"));
  patch.name = in.name();
  std::set<std::string> paths;
  for (const std::string& p : req.update_mask().paths()) {
    std::string path = p.starts_with("pool.") ? p.substr(5) : p;
    static const std::set<std::string> kMutable = {
        "visibility",        "allowed_tenants", "placement_strategy", "compute_overcommit",
        "memory_overcommit", "sharing_mode",    "time_slice_replicas"};
    if (!kMutable.contains(path)) {
      return Invalid("update_mask", "'" + p + "' is not a mutable pool field");
    }
    paths.insert(path);
  }
  bool all = paths.empty();
  auto want = [&](const char* name, bool set) { return all ? set : paths.contains(name); };
  if (want("visibility", in.visibility() != v1::VISIBILITY_UNSPECIFIED)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.visibility,
                             VisibilityFromProto(in.visibility(), "pool.visibility"));
  }
  if (want("allowed_tenants", in.allowed_tenants_size() > 0)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.allowed_tenants,
                             TenantsFromProto(in.allowed_tenants(), "pool.allowed_tenants"));
  }
  if (want("placement_strategy", !in.placement_strategy().empty())) {
    GPUPOOL_RETURN_IF_ERROR(CheckStrategy(in.placement_strategy(), "pool.placement_strategy"));
    patch.placement_strategy = in.placement_strategy();
  }
  if (want("compute_overcommit", in.compute_overcommit() != 0)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.compute_overcommit,
                             RatioFromProto(in.compute_overcommit(), "pool.compute_overcommit"));
  }
  if (want("memory_overcommit", in.memory_overcommit() != 0)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.memory_overcommit,
                             RatioFromProto(in.memory_overcommit(), "pool.memory_overcommit"));
  }
  if (want("sharing_mode", in.sharing_mode() != v1::SHARING_MODE_UNSPECIFIED)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.sharing_mode,
                             SharingFromProto(in.sharing_mode(), "pool.sharing_mode"));
  }
  if (want("time_slice_replicas", in.time_slice_replicas() != 0)) {
    GPUPOOL_RETURN_IF_ERROR(
        CheckRange(in.time_slice_replicas(), 0, kMaxReplicas, "pool.time_slice_replicas"));
    patch.time_slice_replicas = in.time_slice_replicas();
  }
  return patch;
}

Status ApplyPoolPatch(const PoolPatch& patch, PoolRecord* p) {
  if (patch.visibility) p->visibility = *patch.visibility;
  if (patch.allowed_tenants) p->allowed_tenants = *patch.allowed_tenants;
  if (patch.placement_strategy) p->placement_strategy = *patch.placement_strategy;
  if (patch.compute_overcommit) p->compute_overcommit = *patch.compute_overcommit;
  if (patch.memory_overcommit) p->memory_overcommit = *patch.memory_overcommit;
  if (patch.sharing_mode) {
    p->sharing_mode = *patch.sharing_mode;
    if (p->sharing_mode != SharingMode::kTimeSliced && !patch.time_slice_replicas) {
      p->time_slice_replicas = 0;
    }
  }
  if (patch.time_slice_replicas) p->time_slice_replicas = *patch.time_slice_replicas;
  if (p->visibility == Visibility::kPublic && patch.visibility && !patch.allowed_tenants) {
    p->allowed_tenants.clear();
  }
  return CheckPoolConsistency(*p, "pool");
}

void ToProto(const CapacityView& c, v1::Capacity* out) {
  ToProto(c.physical, out->mutable_physical());
  ToProto(c.offered, out->mutable_offered());
  ToProto(c.allocated, out->mutable_allocated());
  out->set_devices(c.devices);
  out->set_nodes(c.nodes);
}

void ToProto(const PoolRecord& p, v1::Pool* out) {
  out->set_name(p.name);
  out->set_visibility(ToProto(p.visibility));
  for (const std::string& t : p.allowed_tenants) out->add_allowed_tenants(t);
  out->set_placement_strategy(p.placement_strategy);
  out->set_compute_overcommit(p.compute_overcommit.ToDouble());
  out->set_memory_overcommit(p.memory_overcommit.ToDouble());
  out->set_sharing_mode(ToProto(p.sharing_mode));
  out->set_time_slice_replicas(p.time_slice_replicas);
  if (p.create_us > 0) SetTime(p.create_us, out->mutable_create_time());
}

void ToProto(const PoolView& v, v1::Pool* out) {
  ToProto(v.pool, out);
  ToProto(v.capacity, out->mutable_capacity());
}

void ToProto(const DeviceView& v, v1::Device* out) {
  const DeviceRecord& d = v.device;
  out->set_id(d.id);
  out->set_model(d.model);
  out->set_index(d.index);
  out->set_mig_profile(d.mig_profile);
  out->set_parent_id(d.parent_id);
  out->set_healthy(d.healthy);
  ToProto(v.capacity, out->mutable_capacity());
}

void ToProto(const NodeView& v, v1::Node* out) {
  const NodeRecord& n = v.node;
  out->set_name(n.name);
  out->set_pool(n.pool);
  out->set_state(ToProto(n.state));
  out->mutable_labels()->insert(n.labels.begin(), n.labels.end());
  out->set_cpu_milli(n.cpu_milli);
  out->set_memory_mib(n.memory_mib);
  for (const DeviceView& d : v.devices) ToProto(d, out->add_devices());
  ToProto(v.capacity, out->mutable_capacity());
  if (n.last_heartbeat_us > 0) SetTime(n.last_heartbeat_us, out->mutable_last_heartbeat_time());
  out->set_running_tasks(v.running_tasks);
}

void ToProto(const GpuModel& m, v1::GpuModel* out) {
  out->set_name(m.name);
  out->set_vendor(m.vendor);
  out->set_bf16_milli_tflops(m.bf16_milli_tflops);
  out->set_fp16_milli_tflops(m.fp16_milli_tflops);
  out->set_vram_mib(m.vram_mib);
  for (const MigProfile& p : m.mig_profiles) {
    v1::MigProfile* pp = out->add_mig_profiles();
    pp->set_name(p.name);
    pp->set_milli_tflops(p.milli_tflops);
    pp->set_vram_mib(p.vram_mib);
    pp->set_max_instances(p.max_instances);
  }
}

}  // namespace gpupool::api
