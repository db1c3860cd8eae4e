// WorkloadFeed: one pool's learned workload and when its engine is given it — the one
// configuration that gpupoold and `gpupool-sim --online` share.
//
// Observe() records submitted tasks in the pool's WorkloadModel (workload_model.h). Sync(engine)
// gives the engine the model (Engine::SetWorkload) when it is due:
//  * the engine never had it, or its nodes changed since (each class's reach depends on them);
//  * or, at a check point — after 1, 2, 4, … up to refresh_tasks tasks, then every
//    refresh_tasks — the model has drifted from what the engine has: the classes' shares differ
//    by at least kDrift in L1 distance (Σ |share now − share pushed|, a class absent counting 0).
// A push clears the engine's score caches (the next decision of each shape rescans the pool's
// nodes: ~0.1–0.6 s at 50,000 nodes), so it is rationed: a stable mix stops causing pushes.
// fgd is given the classes covering 95 % of the weight (FGD's target workload), fgd-pack all of
// them (it weighs rare shapes up by how few nodes can host them) plus one guard class per
// maximal node shape (below); other strategies ignore the workload and are not given it.
//
// Guard classes. A model learns a shape only once a task of it is submitted, and by then every
// node that could host it may hold small tasks placed while the pool was nearly empty: on the
// default trace the first 120-core 8-GPU pod, which only the 4 G3 nodes of a 111-node slice can
// take, found all four nibbled by 1-GPU tasks at 15 % allocation and waited 3.3 h with a third of
// the pool idle (docs/twin.md, "What the twin found"). So fgd-pack is also given, for each node
// shape (non-MIG GPUs, CPU, memory) that no other shape of the pool dominates, the whole node as
// a class weighing one task (share 1 / (1 + Σ learned weights)): its reach is those nodes alone,
// so ΔH keeps them whole while other nodes have room, as it does for a learned rare class, and
// a learned class of the same size takes over once seen. One task's weight leaves the mix
// measures (GPU per CPU, multi-GPU share) as they were once a few hundred tasks are observed. The
// decisions that follow depend only on the sequence of Observe/Sync calls and the engine's inputs,
// never on a clock: replaying the same submissions in the same order gives the same placements.
//
// Pure. Thread safety: none; the pool's owner calls it (the scheduler's strand, or the sim).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "placement/placement.h"
#include "placement/workload_model.h"

namespace gpupool::placement {

// The tie order gpupoold gives a pool's engine (PoolPolicy::tie_seed). fgd and fgd-pack: a
// seeded order, FNV-1a of the pool's name (never 0) — keyed by node names, so it survives
// restarts and does not depend on the order agents registered in; gpupool-sim's seeds stand for
// pool names. Every other strategy: 0, registration order ("first fit" means the first node
// registered that fits, as operators expect).
uint64_t PoolTieSeed(std::string_view pool_name);
uint64_t DaemonTieSeed(Strategy s, std::string_view pool_name);
// The same rule for a replay whose seed stands for the pool's name.
uint64_t ReplayTieSeed(Strategy s, uint64_t seed);

// Whether `s` reads the workload (fgd, fgd-pack).
bool UsesWorkload(Strategy s);
// The share of the model's weight a strategy is given: 0.95 for fgd, 1 otherwise.
double WorkloadCoverage(Strategy s);
// Whether a strategy is given the guard classes (fgd-pack).
bool UsesGuardClasses(Strategy s);
// The whole of each maximal node shape among schedulable nodes with non-MIG GPUs: a whole-GPU
// request of all the node's non-MIG GPUs, CPU and memory, for each shape that no other shape
// matches or exceeds in all three and exceeds in one. Sorted by (GPUs, CPU, memory), distinct.
std::vector<Request> GuardShapes(const std::vector<NodeCapacity>& nodes);

class WorkloadFeed {
 public:
  static constexpr int64_t kRefreshTasks = 2048;
  static constexpr double kDrift = 0.1;

  explicit WorkloadFeed(WorkloadModelOptions options = {}, int64_t refresh_tasks = kRefreshTasks);

  void Observe(const Request& r, int64_t count = 1) { model_.Observe(r, count); }
  // Pushes the model into `engine` when due (above); true when it did.
  bool Sync(Engine& engine);

  const WorkloadModel& model() const { return model_; }

 private:
  WorkloadModel model_;
  int64_t refresh_tasks_;
  int64_t checked_at_ = 0;                           // tasks observed at the last check point
  std::vector<std::pair<uint64_t, double>> pushed_;  // (class id, share) pushed, by id
  int64_t pushes_ = 0;

 public:
  int64_t pushes() const { return pushes_; }
};

}  // namespace gpupool::placement
