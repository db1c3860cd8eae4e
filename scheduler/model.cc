#include "scheduler/model.h"

#include <array>
#include <charconv>
#include <utility>

namespace gpupool {
namespace {

template <typename E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& table, E v) {
  for (const auto& [e, name] : table) {
    if (e == v) return name;
  }
  return "UNKNOWN";
}

template <typename E, size_t N>
std::optional<E> Parse(const std::array<std::pair<E, std::string_view>, N>& table,
                       std::string_view s) {
  for (const auto& [e, name] : table) {
    if (name == s) return e;
  }
  return std::nullopt;
}

constexpr std::array<std::pair<JobState, std::string_view>, 6> kJobStates{{
    {JobState::kPending, "PENDING"},
    {JobState::kRunning, "RUNNING"},
    {JobState::kSucceeded, "SUCCEEDED"},
    {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"},
    {JobState::kCancelling, "CANCELLING"},
}};
constexpr std::array<std::pair<TaskState, std::string_view>, 8> kTaskStates{{
    {TaskState::kPending, "PENDING"},
    {TaskState::kScheduled, "SCHEDULED"},
    {TaskState::kRunning, "RUNNING"},
    {TaskState::kSucceeded, "SUCCEEDED"},
    {TaskState::kFailed, "FAILED"},
    {TaskState::kCancelled, "CANCELLED"},
    {TaskState::kPreempted, "PREEMPTED"},
    {TaskState::kLost, "LOST"},
}};
constexpr std::array<std::pair<Visibility, std::string_view>, 2> kVisibilities{{
    {Visibility::kPublic, "PUBLIC"},
    {Visibility::kPrivate, "PRIVATE"},
}};
constexpr std::array<std::pair<SharingMode, std::string_view>, 3> kSharingModes{{
    {SharingMode::kExclusive, "EXCLUSIVE"},
    {SharingMode::kFractional, "FRACTIONAL"},
    {SharingMode::kTimeSliced, "TIME_SLICED"},
}};
constexpr std::array<std::pair<NodeState, std::string_view>, 4> kNodeStates{{
    {NodeState::kReady, "READY"},
    {NodeState::kNotReady, "NOT_READY"},
    {NodeState::kCordoned, "CORDONED"},
    {NodeState::kDraining, "DRAINING"},
}};

constexpr std::array<std::pair<StopIntent, std::string_view>, 4> kStopIntents{{
    {StopIntent::kNone, ""},
    {StopIntent::kCancel, "CANCEL"},
    {StopIntent::kDrain, "DRAIN"},
    {StopIntent::kPreempt, "PREEMPT"},
}};
constexpr std::array<std::pair<PreemptRule, std::string_view>, 3> kPreemptRules{{
    {PreemptRule::kNone, ""},
    {PreemptRule::kPriority, "priority"},
    {PreemptRule::kReclaim, "reclaim"},
}};

constexpr std::array<std::pair<TaskNetwork, std::string_view>, 4> kTaskNetworks{{
    {TaskNetwork::kNodeDefault, ""},
    {TaskNetwork::kNone, "none"},
    {TaskNetwork::kIsolated, "isolated"},
    {TaskNetwork::kHost, "host"},
}};

constexpr std::array<std::pair<PendingCode, std::string_view>, 10> kPendingCodes{{
    {PendingCode::kNone, ""},
    {PendingCode::kQueued, "QUEUED"},
    {PendingCode::kNoCapacity, "NO_CAPACITY"},
    {PendingCode::kOverQuota, "OVER_QUOTA"},
    {PendingCode::kReserved, "RESERVED"},
    {PendingCode::kGangWaiting, "GANG_WAITING"},
    {PendingCode::kWaitingForVictims, "WAITING_FOR_VICTIMS"},
    {PendingCode::kDisruptionBudget, "DISRUPTION_BUDGET"},
    {PendingCode::kGangRestarting, "GANG_RESTARTING"},
    {PendingCode::kMissingCapability, "MISSING_CAPABILITY"},
}};

constexpr std::array<std::pair<MigRelayout, std::string_view>, 3> kMigRelayouts{{
    {MigRelayout::kOff, "off"},
    {MigRelayout::kIdle, "idle"},
    {MigRelayout::kDrain, "drain"},
}};

constexpr std::array<std::pair<MigLayoutState, std::string_view>, 4> kMigLayoutStates{{
    {MigLayoutState::kDraining, "draining"},
    {MigLayoutState::kApplying, "applying"},
    {MigLayoutState::kApplied, "applied"},
    {MigLayoutState::kFailed, "failed"},
}};

}  // namespace

std::string_view ToString(MigRelayout r) { return NameOf(kMigRelayouts, r); }
std::optional<MigRelayout> ParseMigRelayout(std::string_view s) { return Parse(kMigRelayouts, s); }
std::string_view ToString(MigLayoutState s) { return NameOf(kMigLayoutStates, s); }
std::optional<MigLayoutState> ParseMigLayoutState(std::string_view s) {
  return Parse(kMigLayoutStates, s);
}
std::string_view ToString(PendingCode c) { return NameOf(kPendingCodes, c); }
std::string_view ToString(StopIntent s) { return NameOf(kStopIntents, s); }
std::string_view ToString(PreemptRule r) { return NameOf(kPreemptRules, r); }
std::optional<StopIntent> ParseStopIntent(std::string_view s) { return Parse(kStopIntents, s); }
std::optional<PreemptRule> ParsePreemptRule(std::string_view s) { return Parse(kPreemptRules, s); }
std::string_view ToString(TaskNetwork n) { return NameOf(kTaskNetworks, n); }
std::optional<TaskNetwork> ParseTaskNetwork(std::string_view s) { return Parse(kTaskNetworks, s); }
std::string_view ToString(JobState s) { return NameOf(kJobStates, s); }
std::string_view ToString(TaskState s) { return NameOf(kTaskStates, s); }
std::string_view ToString(Visibility v) { return NameOf(kVisibilities, v); }
std::string_view ToString(SharingMode m) { return NameOf(kSharingModes, m); }
std::string_view ToString(NodeState s) { return NameOf(kNodeStates, s); }
std::optional<JobState> ParseJobState(std::string_view s) { return Parse(kJobStates, s); }
std::optional<TaskState> ParseTaskState(std::string_view s) { return Parse(kTaskStates, s); }
std::optional<Visibility> ParseVisibility(std::string_view s) { return Parse(kVisibilities, s); }
std::optional<SharingMode> ParseSharingMode(std::string_view s) { return Parse(kSharingModes, s); }
std::optional<NodeState> ParseNodeState(std::string_view s) { return Parse(kNodeStates, s); }

CapabilityMask EnforcedCapabilities(const NodeRecord& n) {
  CapabilityMask mask = 0;
  for (const NodeCapabilityRecord& c : n.capabilities) {
    if (c.enforced) mask |= CapabilityBit(c.name);
  }
  return mask;
}

bool IsTerminal(TaskState s) {
  return s == TaskState::kSucceeded || s == TaskState::kFailed || s == TaskState::kCancelled;
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

bool CancelRequested(JobState s) { return s == JobState::kCancelling || s == JobState::kCancelled; }

bool TenantWithin(std::string_view tenant, std::string_view ancestor) {
  if (ancestor.empty() || !tenant.starts_with(ancestor)) return false;
  return tenant.size() == ancestor.size() || tenant[ancestor.size()] == '/';
}

std::string TaskId(int64_t job_id, int32_t index) {
  return std::to_string(job_id) + "." + std::to_string(index);
}

std::string Describe(const Preemption& p) {
  if (p.empty()) return "";
  return "preempted by task " + TaskId(p.job_id, p.index) + " (rule " +
         std::string(ToString(p.rule)) + ")";
}

bool ParseTaskId(std::string_view text, int64_t* job_id, int32_t* index) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == text.size()) return false;
  const char* end = text.data() + dot;
  auto r1 = std::from_chars(text.data(), end, *job_id);
  if (r1.ec != std::errc() || r1.ptr != end || *job_id <= 0) return false;
  const char* end2 = text.data() + text.size();
  auto r2 = std::from_chars(text.data() + dot + 1, end2, *index);
  return r2.ec == std::errc() && r2.ptr == end2 && *index >= 0;
}

}  // namespace gpupool
