// The pool and inventory half of api/convert.h: pools (with update masks), capacity, nodes,
// devices and the GPU catalog.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "api/convert.h"
#include "placement/strategy.h"
#include "pool/capabilities.h"
#include "pool/image_reference.h"

namespace gpupool::api {
namespace {

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

// Known names only, sorted and without duplicates (the stored form). `empty_is_default`: a new
// pool, whose empty list is the default requirement ("none" is none; docs/sandbox.md).
template <typename Names>
Result<std::vector<std::string>> CapabilitiesFromProto(const Names& in, std::string_view field,
                                                       bool empty_is_default) {
  Result<std::vector<std::string>> written =
      RequirementAsWritten(std::vector<std::string>(in.begin(), in.end()), empty_is_default);
  if (!written.ok()) return Invalid(field, written.status().message());
  std::set<std::string> names;
  for (size_t i = 0; i < written->size(); ++i) {
    const std::string& name = (*written)[i];
    if (CapabilityBit(name) == 0) {
      return Invalid(std::string(field) + "[" + std::to_string(i) + "]",
                     CapabilityMaskOf({name}).status().message());
    }
    names.insert(name);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

// Each a valid OCI reference, stored canonical ("busybox" → "docker.io/library/busybox:latest"),
// in the order given, without duplicates, at most kMaxPinnedImages.
template <typename Refs>
Result<std::vector<std::string>> PinnedImagesFromProto(const Refs& in, std::string_view field) {
  if (in.size() > kMaxPinnedImages) {
    return Invalid(field, std::to_string(in.size()) + " images; a pool pins at most " +
                              std::to_string(kMaxPinnedImages));
  }
  std::vector<std::string> out;
  for (int i = 0; i < in.size(); ++i) {
    const std::string at = std::string(field) + "[" + std::to_string(i) + "]";
    Result<ImageReference> ref = ParseImageReference(in.Get(i));
    if (!ref.ok()) return Invalid(at, ref.status().message());
    const std::string canonical = ref->Canonical();
    if (std::find(out.begin(), out.end(), canonical) != out.end()) {
      return Invalid(at, "'" + in.Get(i) + "' is pinned twice");
    }
    out.push_back(canonical);
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
    return Invalid(FieldPath(field, "time_slice_replicas"),
                   "only allowed with sharing_mode SHARING_MODE_TIME_SLICED, got " +
                       std::to_string(p.time_slice_replicas));
  }
  if (p.visibility == Visibility::kPublic && !p.allowed_tenants.empty()) {
    return Invalid(FieldPath(field, "allowed_tenants"),
                   "only allowed with visibility VISIBILITY_PRIVATE");
  }
  if (p.mps_tenant_isolation && p.sharing_mode == SharingMode::kExclusive) {
    // An exclusive pool shares no GPU, so there is no MPS daemon to isolate.
    return Invalid(FieldPath(field, "mps_tenant_isolation"),
                   "only allowed with sharing_mode SHARING_MODE_FRACTIONAL or "
                   "SHARING_MODE_TIME_SLICED");
  }
  if (p.compute_fair && p.sharing_mode == SharingMode::kExclusive) {
    // Whole GPUs have no share to burst past.
    return Invalid(FieldPath(field, "compute_fair"),
                   "only allowed with sharing_mode SHARING_MODE_FRACTIONAL or "
                   "SHARING_MODE_TIME_SLICED");
  }
  return Status::Ok();
}

v1::Visibility ToProto(Visibility v) {
  return v == Visibility::kPrivate ? v1::VISIBILITY_PRIVATE : v1::VISIBILITY_PUBLIC;
}

Result<TaskNetwork> NetworkFromProto(v1::NetworkMode m, std::string_view field) {
  switch (m) {
    case v1::NETWORK_MODE_UNSPECIFIED:
      return TaskNetwork::kNodeDefault;
    case v1::NETWORK_MODE_NONE:
      return TaskNetwork::kNone;
    case v1::NETWORK_MODE_ISOLATED:
      return TaskNetwork::kIsolated;
    case v1::NETWORK_MODE_HOST:
      return TaskNetwork::kHost;
    default:
      return Invalid(field, "unknown value " + std::to_string(static_cast<int>(m)) +
                                "; use NETWORK_MODE_NONE, NETWORK_MODE_ISOLATED or "
                                "NETWORK_MODE_HOST");
  }
}

Result<MigRelayout> MigRelayoutFromProto(v1::MigRelayout m, std::string_view field) {
  switch (m) {
    case v1::MIG_RELAYOUT_UNSPECIFIED:
    case v1::MIG_RELAYOUT_OFF:
      return MigRelayout::kOff;
    case v1::MIG_RELAYOUT_IDLE:
      return MigRelayout::kIdle;
    case v1::MIG_RELAYOUT_DRAIN:
      return MigRelayout::kDrain;
    default:
      return Invalid(field, "unknown value " + std::to_string(static_cast<int>(m)) +
                                "; use MIG_RELAYOUT_OFF, MIG_RELAYOUT_IDLE or MIG_RELAYOUT_DRAIN");
  }
}

v1::MigRelayout ToProto(MigRelayout m) {
  switch (m) {
    case MigRelayout::kOff:
      return v1::MIG_RELAYOUT_OFF;
    case MigRelayout::kIdle:
      return v1::MIG_RELAYOUT_IDLE;
    case MigRelayout::kDrain:
      return v1::MIG_RELAYOUT_DRAIN;
  }
  return v1::MIG_RELAYOUT_UNSPECIFIED;
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

v1::NetworkMode ToProto(TaskNetwork n) {
  switch (n) {
    case TaskNetwork::kNodeDefault:
      return v1::NETWORK_MODE_UNSPECIFIED;
    case TaskNetwork::kNone:
      return v1::NETWORK_MODE_NONE;
    case TaskNetwork::kIsolated:
      return v1::NETWORK_MODE_ISOLATED;
    case TaskNetwork::kHost:
      return v1::NETWORK_MODE_HOST;
  }
  return v1::NETWORK_MODE_UNSPECIFIED;
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
  p.mps_tenant_isolation = in.mps_tenant_isolation();
  p.compute_fair = in.compute_fair();
  GPUPOOL_ASSIGN_OR_RETURN(
      p.required_capabilities,
      CapabilitiesFromProto(in.required_capabilities(), FieldPath(field, "required_capabilities"),
                            /*empty_is_default=*/true));
  GPUPOOL_ASSIGN_OR_RETURN(p.network, NetworkFromProto(in.network(), FieldPath(field, "network")));
  GPUPOOL_ASSIGN_OR_RETURN(
      p.pinned_images,
      PinnedImagesFromProto(in.pinned_images(), FieldPath(field, "pinned_images")));
  GPUPOOL_ASSIGN_OR_RETURN(
      p.mig_relayout, MigRelayoutFromProto(in.mig_relayout(), FieldPath(field, "mig_relayout")));
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
    static const std::set<std::string> kMutable = {"visibility",
                                                   "allowed_tenants",
                                                   "placement_strategy",
                                                   "compute_overcommit",
                                                   "memory_overcommit",
                                                   "sharing_mode",
                                                   "time_slice_replicas",
                                                   "mps_tenant_isolation",
                                                   "compute_fair",
                                                   "required_capabilities",
                                                   "network",
                                                   "pinned_images",
                                                   "mig_relayout"};
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
  if (want("mps_tenant_isolation", in.mps_tenant_isolation())) {
    patch.mps_tenant_isolation = in.mps_tenant_isolation();
  }
  if (want("compute_fair", in.compute_fair())) patch.compute_fair = in.compute_fair();
  if (want("required_capabilities", in.required_capabilities_size() > 0)) {
    GPUPOOL_ASSIGN_OR_RETURN(
        patch.required_capabilities,
        CapabilitiesFromProto(in.required_capabilities(), "pool.required_capabilities",
                              /*empty_is_default=*/false));
  }
  if (want("network", in.network() != v1::NETWORK_MODE_UNSPECIFIED)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.network, NetworkFromProto(in.network(), "pool.network"));
  }
  // An empty list unpins everything: only when the mask names the field.
  if (want("pinned_images", in.pinned_images_size() > 0)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.pinned_images,
                             PinnedImagesFromProto(in.pinned_images(), "pool.pinned_images"));
  }
  if (want("mig_relayout", in.mig_relayout() != v1::MIG_RELAYOUT_UNSPECIFIED)) {
    GPUPOOL_ASSIGN_OR_RETURN(patch.mig_relayout,
                             MigRelayoutFromProto(in.mig_relayout(), "pool.mig_relayout"));
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
    if (p->sharing_mode == SharingMode::kExclusive && !patch.mps_tenant_isolation) {
      p->mps_tenant_isolation = false;
    }
    if (p->sharing_mode == SharingMode::kExclusive && !patch.compute_fair) {
      p->compute_fair = false;
    }
  }
  if (patch.time_slice_replicas) p->time_slice_replicas = *patch.time_slice_replicas;
  if (patch.mps_tenant_isolation) p->mps_tenant_isolation = *patch.mps_tenant_isolation;
  if (patch.compute_fair) p->compute_fair = *patch.compute_fair;
  if (patch.required_capabilities) p->required_capabilities = *patch.required_capabilities;
  if (patch.network) p->network = *patch.network;
  if (patch.pinned_images) p->pinned_images = *patch.pinned_images;
  if (patch.mig_relayout) p->mig_relayout = *patch.mig_relayout;
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
  out->set_mps_tenant_isolation(p.mps_tenant_isolation);
  out->set_compute_fair(p.compute_fair);
  for (const std::string& c : p.required_capabilities) out->add_required_capabilities(c);
  out->set_network(ToProto(p.network));
  for (const std::string& image : p.pinned_images) out->add_pinned_images(image);
  out->set_mig_relayout(ToProto(p.mig_relayout));
  if (p.create_us > 0) SetTimestamp(p.create_us, out->mutable_create_time());
}

void ToProto(const placement::LearnedClass& c, v1::LearnedClass* out) {
  const placement::Request& r = c.shape;
  v1::ResourceRequest* shape = out->mutable_shape();
  switch (r.kind) {
    case placement::RequestKind::kFractional:
      if (r.share_milli == 0) {
        shape->mutable_fractional()->set_milli_tflops(r.per_device.milli_tflops);
        shape->mutable_fractional()->set_vram_mib(r.per_device.vram_mib);
      }
      break;
    case placement::RequestKind::kWholeGpu:
      shape->mutable_whole_gpus()->set_count(r.gpu_count);
      for (const std::string& m : r.allowed_models) shape->mutable_whole_gpus()->add_models(m);
      break;
    case placement::RequestKind::kMig:
      shape->mutable_mig()->set_profile(r.mig_profile);
      break;
    case placement::RequestKind::kCpuOnly:
    case placement::RequestKind::kTimeSlice:
      break;
  }
  shape->set_cpu_milli(r.cpu_milli);
  shape->set_memory_mib(r.memory_mib);
  out->set_share(c.share);
  out->set_prior(c.prior);
  out->set_share_milli(r.share_milli);
}

void ToProto(const PoolView& v, v1::Pool* out) {
  ToProto(v.pool, out);
  ToProto(v.capacity, out->mutable_capacity());
  for (const placement::LearnedClass& c : v.learned.top) ToProto(c, out->add_learned_classes());
  out->set_learned_tasks(v.learned.tasks_observed);
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
  if (v.sample) {
    v1::DeviceSample* s = out->mutable_sample();
    s->set_utilization_pct(v.sample->utilization_pct);
    s->set_memory_used_mib(v.sample->memory_used_mib);
    s->set_memory_total_mib(d.physical.vram_mib);
    s->set_power_watts(v.sample->power_watts);
    s->set_temperature_c(v.sample->temperature_c);
    s->set_ecc_errors(v.sample->ecc_errors);
    s->set_xid_errors(v.sample->xid_errors);
    if (v.sample->time_us > 0) SetTimestamp(v.sample->time_us, s->mutable_sample_time());
  }
  if (v.fault) {
    out->set_fault(v.fault->reason);
    SetTimestamp(v.fault->since_us, out->mutable_fault_time());
  }
  out->set_time_slice_slots(v.slots);
  out->set_slots_used(v.slots_used);
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
  if (n.last_heartbeat_us > 0)
    SetTimestamp(n.last_heartbeat_us, out->mutable_last_heartbeat_time());
  out->set_running_tasks(v.running_tasks);
  for (const NodeCapabilityRecord& c : v.capabilities) {
    v1::NodeCapability* pc = out->add_capabilities();
    pc->set_name(c.name);
    pc->set_enforced(c.enforced);
    pc->set_detail(c.detail);
  }
  for (const std::string& image : v.cached_images) out->add_cached_images(image);
  for (const MigGpuView& g : v.mig_gpus) {
    v1::MigGpu* pg = out->add_mig_gpus();
    pg->set_id(g.gpu.id);
    pg->set_model(g.gpu.model);
    pg->set_index(g.gpu.index);
    pg->set_layout(g.layout);
    if (g.row) {
      pg->set_wanted_layout(g.row->layout);
      pg->set_state(std::string(ToString(g.row->state)));
      pg->set_reason(g.row->reason);
      pg->set_set_by(g.row->set_by);
      pg->set_generation(g.row->generation);
      if (g.row->updated_us > 0) SetTimestamp(g.row->updated_us, pg->mutable_update_time());
    }
    if (g.fault) pg->set_fault(g.fault->reason);
  }
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
    pp->set_memory_slices(p.memory_slices);
    for (int s : p.starts) pp->add_starts(s);
  }
}

}  // namespace gpupool::api
