// The node lease: the scheduler's side of "at most one running copy" (docs/ha.md).
//
// A node holds a lease of L = node_lease_ms (at least T = heartbeat_timeout_ms; gpupoold's
// default 5 minutes). The agent dates it from when it sent the Register or heartbeat the
// scheduler last answered (RegisterAck, LeaseRenewal), so its own deadline is never later than
// the scheduler's view of it (a heartbeat is received after it is sent). Unless renewed, the
// agent SIGTERMs its tasks at L and SIGKILLs what is left G = node_lease_stop_grace_ms later; its
// lease keeper process does the SIGKILL even when the agent itself is stopped or dead
// (agent/lease_keeper.h). T and L are separate on purpose: "stop placing on a silent node" is
// fast, "stop its work and run it elsewhere" waits out restarts, upgrades and database failovers.
//
// The scheduler's side, in Core (node_lease.cc plus two hooks in core_agents.cc):
//   - the last renewal it granted a node is NodeEntry::last_seen_us (monotonic);
//   - silent for T: the node is NOT_READY (nothing new is placed there), its tasks stay put;
//   - silent for L + G + margin (node_lease_margin_ms): its lease has certainly lapsed and the
//     node has fenced itself, so its SCHEDULED and RUNNING tasks are requeued (ReleaseLapsedNodes);
//   - a heartbeat of a NOT_READY node renews nothing: the agent is told to register again
//     (LeaseVerdict::kRegisterAgain), and registering reconciles its tasks and makes it READY;
//   - a restarted scheduler counts every recovered node as renewed at recovery, so agents have
//     the whole L + G + margin to reconnect and re-report finished work before anything moves.
//
// Thread safety: Core's (its thread only).
#pragma once

#include <algorithm>
#include <cstdint>

#include "scheduler/options.h"

namespace gpupool {

// The lease L an agent is given (ms): node_lease_ms, never shorter than the heartbeat timeout.
inline int64_t NodeLeaseMs(const SchedulerOptions& o) {
  return std::max(o.node_lease_ms, o.heartbeat_timeout_ms);
}

// How long after its last renewal a silent node's tasks may be started elsewhere (µs).
inline int64_t NodeLeaseReleaseAfterUs(const SchedulerOptions& o) {
  return (NodeLeaseMs(o) + o.node_lease_stop_grace_ms + o.node_lease_margin_ms) * 1000;
}

}  // namespace gpupool
