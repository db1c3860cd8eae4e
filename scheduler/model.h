// The scheduler's domain model: jobs, tasks, pools and nodes as plain values.
//
// These are what the core reasons about and what the store persists. They know nothing of
// protobuf (api/convert.h translates) or SQL (store/ maps them to rows). Identifiers: a job id is
// a positive integer assigned by the core; a task is (job id, index) and prints as "<job>.<index>".
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "placement/verdict.h"
#include "pool/capabilities.h"
#include "pool/inventory.h"
#include "pool/ports.h"
#include "pool/resources.h"

namespace gpupool {

// kCancelling: CancelJob was committed and some task still holds its devices while it stops; the
// job turns CANCELLED once every task has ended (docs/architecture.md, "Cancelling a job").
enum class JobState { kPending = 1, kRunning, kSucceeded, kFailed, kCancelled, kCancelling };
enum class TaskState {
  kPending = 1,
  kScheduled,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPreempted,
  kLost,
};
enum class Visibility { kPublic = 1, kPrivate };
enum class NodeState { kReady = 1, kNotReady, kCordoned, kDraining };
enum class RequestShape { kFractional = 1, kWholeGpus, kMig, kSku };
// Why the core asked a task that holds devices to stop. Durable (a typed column), so the exit
// report is read the same way after a daemon restart: kCancel ends the task CANCELLED, kDrain
// requeues it (its node is draining), kPreempt requeues it without spending a retry.
enum class StopIntent { kNone = 0, kCancel, kDrain, kPreempt };
// The rule a preemption was made under (docs/tenancy.md).
enum class PreemptRule { kNone = 0, kPriority, kReclaim };
// What a pool's tasks' networks may reach (docs/network.md); kNodeDefault: each agent's
// network.default.
enum class TaskNetwork { kNodeDefault = 0, kNone, kIsolated, kHost };

std::string_view ToString(JobState s);
std::string_view ToString(TaskState s);
std::string_view ToString(Visibility v);
std::string_view ToString(SharingMode m);
std::string_view ToString(NodeState s);
std::string_view ToString(StopIntent s);   // "" for kNone
std::string_view ToString(PreemptRule r);  // "" for kNone
std::string_view ToString(TaskNetwork n);  // "" for kNodeDefault; "none", "isolated", "host"
// Inverse of ToString; nullopt for an unknown name. Used by the store when reading rows.
std::optional<JobState> ParseJobState(std::string_view s);
std::optional<TaskState> ParseTaskState(std::string_view s);
std::optional<Visibility> ParseVisibility(std::string_view s);
std::optional<SharingMode> ParseSharingMode(std::string_view s);
std::optional<NodeState> ParseNodeState(std::string_view s);
std::optional<StopIntent> ParseStopIntent(std::string_view s);
std::optional<PreemptRule> ParsePreemptRule(std::string_view s);
std::optional<TaskNetwork> ParseTaskNetwork(std::string_view s);

// Terminal states never change again (a LOST or PREEMPTED task is requeued as a new attempt,
// which moves it back to PENDING; see scheduler/core.h).
bool IsTerminal(TaskState s);
bool IsTerminal(JobState s);
// True once CancelJob was committed for the job (CANCELLING or CANCELLED).
bool CancelRequested(JobState s);

struct ResourceRequest {
  RequestShape shape = RequestShape::kFractional;
  Resources fractional;             // kFractional
  int32_t gpu_count = 0;            // kWholeGpus
  std::vector<std::string> models;  // kWholeGpus: allowed models, empty = any
  std::string mig_profile;          // kMig
  std::string sku;                  // kSku
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  friend bool operator==(const ResourceRequest&, const ResourceRequest&) = default;
};

struct TaskTemplate {
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  // Delivered like env; never shown by the API nor logged (api/convert.cc redacts it).
  std::map<std::string, std::string> secret_env;
  // An OCI image reference the task runs in (pool/image_reference.h); empty = a plain command on
  // the node. With an image, `command` replaces the image's Cmd (empty: the image's own).
  std::string image;
  // The name of a secret_env entry that is the registry credential for `image`
  // ("USERNAME:PASSWORD"); the node pulls with it and keeps it out of the task's environment.
  std::string registry_credential;
  // With an image: its Entrypoint replaced (empty = the image's), the directory the task starts
  // in (empty = the image's), and its volumes, mount path → dataset name ("" = a scratch
  // directory); pool/volumes.h checks both.
  std::vector<std::string> entrypoint;
  std::string working_dir;
  std::map<std::string, std::string> volumes;
  // The ports the task listens on (pool/ports.h checks them); published by its node.
  std::vector<TaskPort> ports;
  ResourceRequest resources;
  friend bool operator==(const TaskTemplate&, const TaskTemplate&) = default;
};

struct JobSpec {
  std::string tenant;
  std::string pool;
  std::string priority_class;
  int32_t task_count = 1;
  bool gang = false;
  bool preemptible = false;
  int64_t max_runtime_ms = 0;  // 0 = no limit
  std::map<std::string, std::string> labels;
  TaskTemplate task_template;
  int32_t max_retries = 0;
  // SubmitJob's idempotency key (unique per tenant among stored jobs; "" = none) and a digest of
  // the request it came with, to tell a retry from a different request under the same key.
  std::string idempotency_key;
  std::string request_digest;
  // The credential that submitted the job (api/caller.h CallContext::key_id; "" for jobs stored
  // before it was recorded): a member may cancel only the jobs it submitted.
  std::string submitted_by;
  // A replica of a service (scheduler/service.h): the service's id and the generation of its
  // template the replica runs; 0 for a job a tenant submitted. Set only by the service
  // controller, never from the API.
  int64_t service_id = 0;
  int64_t service_generation = 0;
  // The service's name when the replica was made: the usage ledger bills the replica's time
  // under it (an invoice's service line), and it outlives the service.
  std::string service_name;
  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

struct Allocation {
  std::string device_id;
  Resources amount;
  int32_t slots = 0;       // time-slice slots taken on the device
  bool exclusive = false;  // the whole device (whole-GPU, MIG, exclusive pools)
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

// Why a pending task waits, as a code a client can act on (docs/tenancy.md, "Why pending"): the
// placement verdict type (placement/verdict.h) — its code, the binding quota, node counts per
// reason. The verdict of the last pass on a pending task is not stored: every pass recomputes
// it (stores neither write nor read it back).
using PendingCode = placement::VerdictCode;
using PendingVerdict = placement::Verdict;
std::string_view ToString(PendingCode c);  // "NO_CAPACITY", …; "" for kNone

// The last preemption of a task, as typed facts (never parsed back from `reason`). It stays on
// the task after the task is requeued, so GetJob still says who took its devices and why.
struct Preemption {
  int64_t job_id = 0;  // the preemptor's job; 0: never preempted
  int32_t index = 0;   // the preemptor's task index
  PreemptRule rule = PreemptRule::kNone;
  // True for a victim whose room is reserved for the preemptor (the preemptor waits for it);
  // false for a gang member stopped only because a sibling was chosen.
  bool reserved = false;
  bool empty() const { return job_id == 0; }
  friend bool operator==(const Preemption&, const Preemption&) = default;
};

// What a task's last ended attempt used, read by its agent from the task's cgroup (zero when it
// ran unsandboxed or has not ended).
struct TaskUsageRecord {
  int64_t cpu_usage_us = 0;
  int64_t peak_memory_bytes = 0;
  int64_t oom_kills = 0;
  // Measured by the node (the GPU interposer's ledger): VRAM served from host memory × time.
  int64_t spill_mib_seconds = 0;
  friend bool operator==(const TaskUsageRecord&, const TaskUsageRecord&) = default;
};

// An image a node's store holds, as its agent reports it (Register/Heartbeat.image_cache), for
// placement by cached layers (scheduler/image_locality.h). Not stored.
struct NodeImage {
  std::string manifest_digest;
  std::vector<std::string> references;                  // canonical (pool/image_reference.h)
  std::vector<std::pair<std::string, int64_t>> layers;  // digest, bytes
};

// The image pull a node reported for an attempt it has not started yet (TaskUpdate PULLING).
// Advisory and in memory only: the API shows a SCHEDULED task as PULLING while `attempt` is the
// task's attempt.
struct PullProgress {
  int32_t attempt = -1;  // the attempt it is for; -1: none reported
  std::string image;
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  friend bool operator==(const PullProgress&, const PullProgress&) = default;
};

struct TaskRecord {
  int64_t job_id = 0;
  int32_t index = 0;
  TaskState state = TaskState::kPending;
  std::string node;
  std::vector<Allocation> allocations;
  int32_t attempt = 0;
  int32_t exit_code = 0;
  std::string reason;
  int64_t scheduled_us = 0;
  int64_t started_us = 0;
  int64_t finished_us = 0;
  StopIntent stop = StopIntent::kNone;  // set while a stop the core asked for is under way
  Preemption preempted_by;              // the last preemption (kept after a requeue)
  PendingVerdict pending;               // not stored: why it waits, while PENDING
  TaskUsageRecord usage;                // of the last attempt that ended (sandboxed tasks)
  PullProgress pull;                    // not stored: its node's image pull, while SCHEDULED
  // Where its declared ports are reached, as its node reported them with RUNNING (stored; the
  // API shows them while RUNNING; cleared when it is requeued).
  std::vector<TaskEndpoint> endpoints;
  // The pull to show: the current attempt's, while the task waits SCHEDULED for its node.
  bool Pulling() const { return state == TaskState::kScheduled && pull.attempt == attempt; }
  friend bool operator==(const TaskRecord&, const TaskRecord&) = default;
};

struct JobRecord {
  int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::kPending;
  std::string reason;
  int64_t submit_us = 0;
  int64_t finish_us = 0;
  std::vector<TaskRecord> tasks;
  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// How the scheduler may change the MIG layouts of a pool's GPUs (docs/placement.md, "Dynamic
// MIG"). An admin's SetMigLayout works whatever the policy.
enum class MigRelayout : uint8_t {
  kOff = 0,  // layouts change only when an admin sets one
  kIdle,     // GPUs none of whose instances runs a task are re-laid out for pending demand
  kDrain,    // kIdle, and a busy GPU is drained (no new work) for a better layout when no idle
             // one can serve the demand
};
std::string_view ToString(MigRelayout r);
std::optional<MigRelayout> ParseMigRelayout(std::string_view s);

struct PoolRecord {
  std::string name;
  Visibility visibility = Visibility::kPublic;
  std::vector<std::string> allowed_tenants;
  std::string placement_strategy;
  Ratio compute_overcommit;
  Ratio memory_overcommit;
  SharingMode sharing_mode = SharingMode::kFractional;
  int32_t time_slice_replicas = 0;
  int64_t create_us = 0;
  // Shared grants on the pool's nodes use one MPS control daemon per tenant per GPU (an MPS
  // fault stays within its tenant) instead of one per GPU.
  bool mps_tenant_isolation = false;
  // Slices' compute shares burst into their GPUs' idle time (fair) instead of being strict caps.
  bool compute_fair = false;
  // What a node must enforce to take the pool's shared (fractional or time-sliced) work, by
  // name (pool/capabilities.h); sorted, no duplicates. Empty: any node.
  std::vector<std::string> required_capabilities;
  // What its tasks' networks may reach (StartTask.network).
  TaskNetwork network = TaskNetwork::kNodeDefault;
  // Images every node of the pool pulls and keeps (Pool.pinned_images): canonical references,
  // in the order they were pinned, no duplicates.
  std::vector<std::string> pinned_images;
  // Whether the scheduler re-partitions the pool's MIG GPUs to follow demand (MigRelayout).
  MigRelayout mig_relayout = MigRelayout::kOff;
  friend bool operator==(const PoolRecord&, const PoolRecord&) = default;
};

struct DeviceRecord {
  std::string id;  // GPU or MIG instance UUID
  std::string model;
  int32_t index = 0;
  Resources physical;
  std::string mig_profile;
  std::string parent_id;
  bool healthy = true;
  int32_t numa_node = 0;
  // Time-slice slots the node's agent config gives it (0: none); an admin's DeviceSlotsRecord
  // overrides it.
  int32_t time_slice_slots = 0;
  int32_t mig_start = 0;     // a MIG instance: its first memory slice (pool/mig_layout.h)
  bool mig_enabled = false;  // a GPU whose MIG mode is on: its layout can change
  friend bool operator==(const DeviceRecord&, const DeviceRecord&) = default;
};

struct LinkRecord {
  int32_t a = 0;  // device index
  int32_t b = 0;
  LinkKind kind = LinkKind::kSystem;
  int32_t bandwidth_gbps = 0;
  friend bool operator==(const LinkRecord&, const LinkRecord&) = default;
};

// One line of what a node's agent can and cannot enforce (Register.capabilities).
struct NodeCapabilityRecord {
  std::string name;
  bool enforced = false;
  std::string detail;
  friend bool operator==(const NodeCapabilityRecord&, const NodeCapabilityRecord&) = default;
};

struct NodeRecord {
  std::string name;
  std::string pool;
  NodeState state = NodeState::kReady;
  std::map<std::string, std::string> labels;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t spill_budget_mib = 0;
  std::vector<DeviceRecord> devices;
  std::vector<LinkRecord> links;
  int64_t last_heartbeat_us = 0;
  // What the agent said at its last registration it can and cannot enforce; stored with the
  // node, so `nodes get` shows it while the agent is away and after a gpupoold restart.
  std::vector<NodeCapabilityRecord> capabilities;
  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

// The requirable capabilities (pool/capabilities.h) `n`'s agent said it enforces.
CapabilityMask EnforcedCapabilities(const NodeRecord& n);

// A fatal fault (XID / uncorrectable ECC) an agent reported on one of its devices. While not
// cleared the device is out of service, whatever the agent says later, across restarts of the
// agent and of gpupoold; an admin clears it (the row stays, cleared, so the same fault_id
// reported again by an agent that still remembers it does not raise it anew).
struct DeviceFaultRecord {
  std::string node;
  std::string device;    // GPU or MIG instance UUID
  std::string reason;    // "XID 79 (GPU has fallen off the bus)"
  int64_t fault_id = 0;  // the agent's id for the event (its time in µs); > 0
  int64_t since_us = 0;  // when gpupoold stored it
  bool cleared = false;
  std::string cleared_by;
  int64_t cleared_us = 0;
  friend bool operator==(const DeviceFaultRecord&, const DeviceFaultRecord&) = default;
};

// Time-slicing set on one device by an admin (issue 27): the GPU or MIG instance offers `slots`
// slots, whatever its pool's sharing mode (placement::DeviceSpec::time_slice_slots). Kept apart
// from the node's devices, which its agent re-reports, so it outlives re-registration. No row,
// or slots 0: the pool decides.
struct DeviceSlotsRecord {
  std::string node;
  std::string device;  // GPU or MIG instance UUID
  int32_t slots = 0;   // 1..kMaxDeviceSlots; a row with 0 is deleted
  std::string set_by;
  int64_t set_us = 0;
  friend bool operator==(const DeviceSlotsRecord&, const DeviceSlotsRecord&) = default;
};
inline constexpr int32_t kMaxDeviceSlots = 64;

// A MIG layout the scheduler asked a GPU's agent for (issue 27; docs/placement.md, "Dynamic
// MIG"): stored before the agent is asked, so a restart of either side resumes it. While
// kApplying (and kDraining) none of the GPU's instances takes new work; the agent's next
// registration settles it: its devices show the layout (kApplied) or it says why not (kFailed,
// the GPU back on its previous layout, or out of service when even that was lost).
enum class MigLayoutState : uint8_t { kDraining = 0, kApplying, kApplied, kFailed };
std::string_view ToString(MigLayoutState s);
std::optional<MigLayoutState> ParseMigLayoutState(std::string_view s);

struct MigLayoutRecord {
  std::string node;
  std::string gpu;         // the GPU's UUID (not an instance's)
  std::string layout;      // FormatMigLayout's text ("" = no instance)
  int64_t generation = 0;  // grows per GPU; the agent answers for one generation
  MigLayoutState state = MigLayoutState::kApplying;
  std::string reason;  // why it was asked (applying) or why it failed
  std::string set_by;  // the admin, or "scheduler" for the pool's policy
  int64_t updated_us = 0;
  friend bool operator==(const MigLayoutRecord&, const MigLayoutRecord&) = default;
};

// A tenant: one node of the org / project / user tree, named by its path ("acme/research/alice").
// A tenant's parent is its path without the last segment; the parent must exist first.
struct TenantRecord {
  std::string path;
  int64_t create_us = 0;
  friend bool operator==(const TenantRecord&, const TenantRecord&) = default;
};

// An amount in a quota's normalized units: compute (milli-TFLOPS), VRAM (MiB) and devices. A
// device is an exclusive grant (a whole GPU or a MIG instance); fractional slices count none.
// A value type: `+` and `-` per dimension (usage is charged and uncharged with them; callers
// never subtract more than they added, so usage stays ≥ 0), `Fits` against a cap.
struct QuotaAmount {
  Resources resources;
  int32_t devices = 0;
  bool IsZero() const { return resources.IsZero() && devices == 0; }
  QuotaAmount& operator+=(const QuotaAmount& o) {
    resources.milli_tflops += o.resources.milli_tflops;
    resources.vram_mib += o.resources.vram_mib;
    devices += o.devices;
    return *this;
  }
  QuotaAmount& operator-=(const QuotaAmount& o) {
    resources.milli_tflops -= o.resources.milli_tflops;
    resources.vram_mib -= o.resources.vram_mib;
    devices -= o.devices;
    return *this;
  }
  friend QuotaAmount operator+(QuotaAmount a, const QuotaAmount& b) { return a += b; }
  friend QuotaAmount operator-(QuotaAmount a, const QuotaAmount& b) { return a -= b; }
  // The first dimension (0 TFLOPS, 1 VRAM, 2 devices) in which this amount exceeds `cap`, or -1.
  // A dimension `cap` leaves at 0 is not capped (a quota's "0: not limited").
  int FirstOver(const QuotaAmount& cap) const {
    if (cap.resources.milli_tflops > 0 && resources.milli_tflops > cap.resources.milli_tflops)
      return 0;
    if (cap.resources.vram_mib > 0 && resources.vram_mib > cap.resources.vram_mib) return 1;
    if (cap.devices > 0 && devices > cap.devices) return 2;
    return -1;
  }
  bool Fits(const QuotaAmount& cap) const { return FirstOver(cap) < 0; }
  friend bool operator==(const QuotaAmount&, const QuotaAmount&) = default;
};

// A tenant's quota in one pool. `guaranteed`: what the tenant gets back by reclaim when it wants
// it (0 in a dimension: nothing guaranteed). `limit`: the most it may hold by borrowing what
// others leave idle (0 in a dimension: that dimension is not limited). See docs/tenancy.md.
struct QuotaRecord {
  std::string tenant;
  std::string pool;
  QuotaAmount guaranteed;
  QuotaAmount limit;
  friend bool operator==(const QuotaRecord&, const QuotaRecord&) = default;
};

// An entry of the append-only event log: every state transition and its cause.
struct EventRecord {
  int64_t time_us = 0;
  std::string kind;     // "job.submitted", "task.state", "task.preempted", "pool.created", …
  std::string subject;  // "job/12", "task/12.0", "pool/gpu-a", "node/n1"
  std::string message;
  // The tenant whose job the subject belongs to ("" for pool, node and tenant events): what a
  // tenant's webhooks follow (scheduler/webhooks.h).
  std::string tenant;
  friend bool operator==(const EventRecord&, const EventRecord&) = default;
};

// True when `tenant` is `ancestor` or lies below it in the tenant tree: the prefix must end at a
// segment ("acme/research" is within "acme", "acme/researchers" is not within "acme/research").
// An empty ancestor contains nothing.
bool TenantWithin(std::string_view tenant, std::string_view ancestor);

std::string TaskId(int64_t job_id, int32_t index);
// "preempted by task 8.0 (rule priority)": the display text of a preemption's typed facts.
std::string Describe(const Preemption& p);
// Parses "<job>.<index>"; false when malformed.
bool ParseTaskId(std::string_view text, int64_t* job_id, int32_t* index);

}  // namespace gpupool
