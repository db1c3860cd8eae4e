// PlanMigRelayouts: which of a pool's MIG GPUs to re-partition, and into what, for the MIG work
// that found no room (issue 27; docs/placement.md, "Dynamic MIG"). A planner that writes
// nothing: the core stores each choice (a MigLayoutRecord) before anything acts on it.
//
// The demand is the tasks waiting for room, per profile (a waiting task found no free instance
// of its profile anywhere in the pool). Each GPU's new layout is, among the model's maximal
// layouts (pool/mig_layout.h) that serve the most of that demand, the one pool/mig_layout.h's
// planner picks for the pool's learned mix (the online workload model's MIG classes): the
// spare slices take the shapes the pool usually asks for. A GPU is re-laid out only when the new
// layout serves strictly more of the waiting demand than its current one, and at most once per
// cooldown, so two shapes competing for one GPU do not make it flap. What one GPU serves is taken
// off the demand before the next GPU is looked at.
//
// Only idle GPUs (no task holds any instance) are re-laid out. Under the drain policy, when idle
// GPUs cannot serve what waits, one busy GPU per plan — the one with the fewest busy instances
// whose better layout serves the most — is drained: its instances take no new work, its running
// tasks finish undisturbed, and it is re-laid out once idle.
//
// Thread safety: a function of values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pool/catalog.h"
#include "pool/mig_layout.h"
#include "scheduler/model.h"

namespace gpupool {

struct MigGpu {
  std::string node;
  std::string gpu;
  const GpuModel* model = nullptr;  // with placement rules (others are not offered)
  MigLayout current;
  int32_t busy_instances = 0;  // instances a task holds
  int64_t last_change_us = 0;  // its layout's last change (its row's update); 0: never
};

struct MigPlanInput {
  std::vector<MigGpu> gpus;                         // re-partitionable and not held out
  std::map<std::string, int32_t> waiting;           // profile → tasks that found no room
  std::vector<std::pair<std::string, double>> mix;  // learned MIG classes: profile, weight
  MigRelayout policy = MigRelayout::kOff;
  int64_t now_us = 0;
  int64_t cooldown_us = 0;
};

struct MigRelayoutChoice {
  std::string node;
  std::string gpu;
  MigLayout layout;
  bool drain = false;  // busy: drained first (kDraining), re-laid out once idle
  std::string reason;
};

std::vector<MigRelayoutChoice> PlanMigRelayouts(const MigPlanInput& in);

}  // namespace gpupool
