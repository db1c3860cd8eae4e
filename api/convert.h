// convert: the one place where gpupool.v1 protobuf messages and the scheduler's domain values
// meet, both ways, with validation at the edge.
//
// Inbound (`...FromProto`) functions check syntax and ranges only — what can be judged from the
// message alone — and return INVALID_ARGUMENT with a message that names the field, e.g.
//   "spec.task_count: must be between 1 and 10000, got 0".
// Semantic checks that need state (unknown pool, SKU or priority class, private pool access, a
// request larger than any device) belong to the scheduler core. Nothing that fails here may
// reach the core.
//
// Outbound (`ToProto`) functions never fail: the domain is valid by construction.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/validate.h"
#include "base/status.h"
#include "gpupool/v1/agent.pb.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/tenants.pb.h"
#include "pool/catalog.h"
#include "scheduler/dispatch.h"
#include "scheduler/model.h"
#include "scheduler/options.h"
#include "scheduler/views.h"

namespace gpupool::api {

namespace v1 = ::gpupool::v1;

// Microseconds since the Unix epoch → Timestamp.
void SetTimestamp(int64_t micros, google::protobuf::Timestamp* out);

// ---- Jobs ----
// Validates and converts a job spec. `field` prefixes messages ("spec").
Result<JobSpec> JobSpecFromProto(const v1::JobSpec& spec, std::string_view field = "spec");
// Filters, page size and page token of a ListJobs request.
Result<JobFilter> JobFilterFromProto(const v1::ListJobsRequest& req);

void ToProto(const ResourceRequest& request, v1::ResourceRequest* out);
v1::NetworkMode ToProto(TaskNetwork network);
// What GetJob, ListJobs and watches show for a secret env value (TaskTemplate.secret_env).
inline constexpr char kRedacted[] = "<redacted>";

// A job's spec as the API shows it: secret_env values are kRedacted.
void ToProto(const JobSpec& spec, v1::JobSpec* out);
// A task template as a job's or a service's (`field` prefixes the names in errors); secret env
// values leave as "<redacted>".
Result<TaskTemplate> TaskTemplateFromProto(const v1::TaskTemplate& in, std::string_view field);
void ToProto(const TaskTemplate& in, v1::TaskTemplate* out);
void ToProto(const TaskRecord& task, v1::Task* out);
void ToProto(const JobRecord& job, v1::Job* out);
void ToProto(const JobChange& change, v1::JobEvent* out);

v1::JobState ToProto(JobState s);
v1::TaskState ToProto(TaskState s);
// Proto → domain enums; nullopt for UNSPECIFIED or unknown numbers.
std::optional<JobState> FromProto(v1::JobState s);
std::optional<TaskState> FromProto(v1::TaskState s);

// ---- Pools ----
// Validates and converts a pool for creation (`field` prefixes messages: "pool").
Result<PoolRecord> PoolFromProto(const v1::Pool& pool, std::string_view field = "pool");

// A validated partial update of a pool (UpdatePool with its field mask).
struct PoolPatch {
  std::string name;
  std::optional<Visibility> visibility;
  std::optional<std::vector<std::string>> allowed_tenants;
  std::optional<std::string> placement_strategy;
  std::optional<Ratio> compute_overcommit;
  std::optional<Ratio> memory_overcommit;
  std::optional<SharingMode> sharing_mode;
  std::optional<int32_t> time_slice_replicas;
  std::optional<bool> mps_tenant_isolation;
  std::optional<bool> compute_fair;
  std::optional<std::vector<std::string>> required_capabilities;
  std::optional<TaskNetwork> network;
  std::optional<std::vector<std::string>> pinned_images;
  std::optional<MigRelayout> mig_relayout;
};
// Images a pool may pin (Pool.pinned_images).
inline constexpr int kMaxPinnedImages = 16;
// Validates the fields the mask names (empty mask: every mutable field that is set).
Result<PoolPatch> PoolPatchFromProto(const v1::UpdatePoolRequest& req);
// Applies `patch` to `pool` and checks the result is consistent (replicas vs. sharing mode,
// allowed tenants vs. visibility). INVALID_ARGUMENT naming the field otherwise.
Status ApplyPoolPatch(const PoolPatch& patch, PoolRecord* pool);

void ToProto(const CapacityView& c, v1::Capacity* out);
void ToProto(const PoolRecord& pool, v1::Pool* out);
void ToProto(const PoolView& pool, v1::Pool* out);
void ToProto(const DeviceView& device, v1::Device* out);
void ToProto(const NodeView& node, v1::Node* out);
void ToProto(const GpuModel& model, v1::GpuModel* out);

// ---- Tenants and quotas (api/convert_tenant.cc) ----
// Upper bounds of one quota amount, the same as gpupoold's config file accepts.
inline constexpr int64_t kMaxQuotaMilliTflops = 1'000'000'000'000;  // a billion TFLOPS
inline constexpr int64_t kMaxQuotaVramMib = int64_t{1} << 50;
inline constexpr int32_t kMaxQuotaDevices = 10'000'000;
inline constexpr int32_t kMaxQuotaSkuCount = 1'000'000;

// Validates a tenant for creation (`field` prefixes messages: "tenant"). Its quotas are output
// only and refused here (they are set with SetQuota); create_time is output only and ignored.
Result<TenantRecord> TenantFromProto(const v1::Tenant& tenant, std::string_view field = "tenant");
// Validates an amount: either resources and devices, or sku and sku_count, which become
// normalized units through `options`' SKU table (NOT_FOUND naming the field for an unknown SKU).
Result<QuotaAmount> QuotaAmountFromProto(const v1::QuotaAmount& amount,
                                         const SchedulerOptions& options, std::string_view field);
// Validates a quota (tenant, pool, guaranteed, limit; used and borrowed are output only and
// ignored). The tree rules (a child within its parent) are the core's.
Result<QuotaRecord> QuotaFromProto(const v1::Quota& quota, const SchedulerOptions& options,
                                   std::string_view field = "quota");

// Amounts always come out in normalized units (resources and devices), never as a SKU.
void ToProto(const QuotaAmount& amount, v1::QuotaAmount* out);
void ToProto(const QuotaView& quota, v1::Quota* out);
void ToProto(const TenantView& tenant, v1::Tenant* out);

// ---- Agents ----
Result<AgentRegistration> RegistrationFromProto(const v1::Register& reg);
std::vector<DeviceHealth> DeviceHealthFromProto(const v1::Heartbeat& hb);
Result<TaskReport> TaskReportFromProto(const std::string& node, const v1::TaskUpdate& update);
// A node's image cache (Register/Heartbeat.image_cache), within bounds: at most 4096 images of
// at most 1024 layers and 64 references each, sha256 digests, sizes >= 0, references that parse.
// InvalidArgument naming the first field that breaks them.
Result<std::vector<NodeImage>> NodeImagesFromProto(const v1::ImageCache& cache);
// A task's volumes (mount path → dataset, "" = scratch), as TaskTemplate and StartTask carry them.
void VolumesToProto(const std::map<std::string, std::string>& volumes,
                    google::protobuf::RepeatedPtrField<v1::Volume>* out);
// A task's ports (TaskTemplate.ports, StartTask.ports): an empty protocol is "tcp"; each is
// checked (pool/ports.h), InvalidArgument naming `field`[i]. And back.
Result<std::vector<TaskPort>> PortsFromProto(const google::protobuf::RepeatedPtrField<v1::Port>& in,
                                             std::string_view field);
void PortsToProto(const std::vector<TaskPort>& ports,
                  google::protobuf::RepeatedPtrField<v1::Port>* out);
void EndpointsToProto(const std::vector<TaskEndpoint>& endpoints,
                      google::protobuf::RepeatedPtrField<v1::Endpoint>* out);
void ToProto(const RegistrationResult& r, v1::RegisterAck* out);
void ToProto(const StartTaskCommand& cmd, v1::StartTask* out);
void ToProto(const StopTaskCommand& cmd, v1::StopTask* out);
void ToProto(const PinImagesCommand& cmd, v1::PinnedImages* out);
void ToProto(const MigLayoutCommand& cmd, v1::SetMigLayout* out);

}  // namespace gpupool::api
