// placement::Verdict: why a request is not placed, as a type a client can act on.
//
// A verdict is a code, the binding limit when one binds, and how many nodes refused the request
// per reason ("vram" → 3), as the engine counted them while explaining a Decision. placement
// decides the capacity verdicts from its own answers (VerdictOf: kNone when placed, kNoCapacity
// or kGangWaiting with the node counts otherwise); the scheduler, which owns quotas,
// reservations and preemption, gives the other codes. The API carries the same codes, numbered
// alike (api/gpupool/v1/jobs.proto, PendingReason.Code; api/convert.cc checks it).
//
// Invariants: nodes_by_reason lists each reason once, in name order, with a count > 0; it is
// empty unless the code is kNoCapacity, kGangWaiting or kDisruptionBudget (victims were sought
// because the nodes refused). Pure values, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpupool::placement {

struct Decision;

enum class VerdictCode : uint8_t {
  kNone = 0,           // not pending: placed (or not looked at by a pass at all)
  kQueued,             // not looked at yet (submitted or requeued since the last pass)
  kNoCapacity,         // no node has room now (nodes_by_reason says what each lacks)
  kOverQuota,          // a quota of its tenant chain binds (binding names it)
  kReserved,           // the free room is reserved for a preempting task
  kGangWaiting,        // its gang does not fit whole
  kWaitingForVictims,  // it preempted: waits for its victims to stop
  kDisruptionBudget,   // victims exist but their group's disruption budget is spent
  kGangRestarting,     // its gang was preempted whole: waits for every member to stop
  kMissingCapability,  // shared work, and no node of the pool enforces what it requires
};

struct Verdict {
  VerdictCode code = VerdictCode::kNone;
  std::string binding;  // the binding quota ("acme/research in pool gpu: tflops") or resource
  // Nodes that refused the request, per reason ("vram" → 3), as the engine counted them.
  std::vector<std::pair<std::string, int32_t>> nodes_by_reason;
  friend bool operator==(const Verdict&, const Verdict&) = default;
};

// The capacity verdict of one decision: kNone when placed; otherwise `unplaced` (kNoCapacity for
// a single request, kGangWaiting for a gang's failing member) with the decision's node counts
// per reason.
Verdict VerdictOf(const Decision& d, VerdictCode unplaced = VerdictCode::kNoCapacity);

}  // namespace gpupool::placement
