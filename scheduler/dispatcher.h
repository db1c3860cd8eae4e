// Dispatcher: builds the StartTask and StopTask commands the core sends to node agents, and sends
// them through the AgentGateway port. It owns the command policy: what a task's environment,
// limits and devices become on the wire, and the MPS share of a fractional grant.
//
// REQUIRES (the change path, core_change.cc): callers dispatch only what is durable — a start
// once the task's SCHEDULED row and allocation are stored, a stop once its stop intent is.
// A command to a node without a connected agent is dropped (logged); reconciliation on reconnect
// repairs the difference (core_agents.cc).
//
// Single-threaded (the core's thread). The gateway must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "scheduler/dispatch.h"
#include "scheduler/job_table.h"
#include "scheduler/model.h"

namespace gpupool {

// MPS policy: the percentage of a device's SMs a fractional grant of `granted_milli_tflops` gets,
// rounded up so a grant is never starved, within 1..100. An exclusive grant, or a device whose
// compute is unknown (0), gets 100.
int32_t MpsThreadPercentage(int64_t granted_milli_tflops, int64_t device_milli_tflops,
                            bool exclusive);

class Dispatcher {
 public:
  using NodeLookup = std::function<const NodeRecord*(const std::string& node)>;
  using PoolLookup = std::function<const PoolRecord*(const std::string& pool)>;

  Dispatcher() = default;
  // REQUIRES: `agents` outlives the dispatcher.
  Dispatcher(AgentGateway* agents, int64_t stop_grace_period_ms, NodeLookup nodes,
             PoolLookup pools = {})
      : agents_(agents),
        grace_ms_(stop_grace_period_ms),
        nodes_(std::move(nodes)),
        pools_(std::move(pools)) {}

  void set_epoch(int64_t epoch) { epoch_ = epoch; }

  // The command starting task `index` of `job` on its record's node; `node` gives the devices'
  // compute for the MPS share (null: every grant at 100%), `pool` the job's pool's MPS isolation
  // (null: none).
  static StartTaskCommand BuildStart(const JobEntry& job, int32_t index, const NodeRecord* node,
                                     int64_t epoch, const PoolRecord* pool = nullptr);
  StopTaskCommand BuildStop(const JobEntry& job, int32_t index, const std::string& reason) const;

  void Start(const JobEntry& job, int32_t index);
  void Stop(const JobEntry& job, int32_t index, const std::string& reason);
  // Sends `pool`'s pinned images to each of `nodes` (its nodes); returns how many took them.
  // REQUIRES: the pool record is stored.
  int PinImages(const PoolRecord& pool, const std::set<std::string>& nodes);
  // Asks `row.node`'s agent for `row`'s layout. REQUIRES: the row is stored (kApplying).
  bool SetMigLayout(const MigLayoutRecord& row);

 private:
  AgentGateway* agents_ = nullptr;
  int64_t grace_ms_ = 0;
  NodeLookup nodes_;
  PoolLookup pools_;
  int64_t epoch_ = 0;
};

}  // namespace gpupool
