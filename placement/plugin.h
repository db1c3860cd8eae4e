// StrategyPlugin: the score stage. One implementation per Strategy (placement/strategies/),
// made by MakePlugin — the registry's other half (strategy.cc holds the names).
//
// Contract: Score() sees a node that passed the filter, with `candidates` the devices that can
// each take the request; it picks the devices (usually ChooseDevices from fit.h) and a score,
// higher wins; equal scores go to the node with the smaller tie key. Returning false drops the
// node. A Cacheable() plugin's score depends only on the node's state and the request's shape
// (host memory included only if ScoresMemory()), so the engine caches it until the node changes.
//
// Thread safety: none; a plugin belongs to one Engine.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "placement/state.h"
#include "placement/strategy.h"

namespace gpupool::placement {

// A workload class compiled for fragmentation measures (FGD): the GPU demand of a typical task.
struct FragClass {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;  // typical host memory of the class
  int32_t gpu_milli = 0;   // per device; 1000 for whole GPUs
  int gpu_count = 0;       // 0: CPU-only
  uint64_t model_mask = ~uint64_t{0};
  double p = 0;  // probability, Σ p = 1
  // Share of the pool's nodes that could host the class when empty (1 = every node). Rare
  // shapes that few nodes can take (120 cores + 8 GPUs) have a small reach.
  double reach = 1;
  // Share of the pool's GPUs (whole devices, not MIG instances) whose model the class allows
  // (1 = any model). A class pinned to a rare model leans on few GPUs.
  double model_share = 1;
  // 1/g, 1/cpu, 1/memory (0 when absent): the hot loop multiplies instead of dividing.
  double inv_gpu = 0, inv_cpu = 0, inv_mem = 0;
};

struct Scored {
  int64_t score = 0;
  DeviceSet devices;
};

// The pool's live capacity when the workload was last set (SetWorkload): what the fragmentation
// strategies weigh the workload's demand against.
struct PoolShape {
  int64_t cpu_milli = 0;  // Σ cpu_total over live nodes
  int64_t gpu_milli = 0;  // 1000 per whole GPU (MIG instances excluded)
  // Live GPU nodes grouped by (cores, GPUs): how the CPU is spread over the GPUs.
  struct Kind {
    int64_t cpu_milli = 0;
    int64_t gpu_milli = 0;
    int64_t count = 0;
  };
  std::vector<Kind> kinds = {};
  // Live nodes by hardware type (index = NodeState::type; count 0 where no live node has it):
  // how many, and one node's cores, memory and whole GPUs per model.
  struct Type {
    int64_t count = 0;
    int64_t cpu_milli = 0, memory_mib = 0;
    std::vector<std::pair<int, int>> gpus = {};  // (model id, devices), MIG instances excluded
  };
  std::vector<Type> types = {};
};

struct PluginEnv {
  const std::vector<FragClass>* workload = nullptr;  // owned by the engine; may change
  uint64_t seed = 0;
  const PoolShape* pool = nullptr;  // owned by the engine; updated before WorkloadChanged()
};

class StrategyPlugin {
 public:
  virtual ~StrategyPlugin() = default;
  virtual bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
                     Scored* out) const = 0;
  virtual bool Cacheable() const { return true; }
  // A plugin whose score depends on the request's host memory says so; the engine then keeps
  // one cached index per memory size too.
  virtual bool ScoresMemory() const { return false; }
  // Called when the workload changes: drop anything derived from it.
  virtual void WorkloadChanged() {}
};

std::unique_ptr<StrategyPlugin> MakePlugin(Strategy s, const PluginEnv& env);

// Factories, one per file pair under placement/strategies/.
std::unique_ptr<StrategyPlugin> MakeFirstFit();
std::unique_ptr<StrategyPlugin> MakeBestFit();
std::unique_ptr<StrategyPlugin> MakeSpread();
std::unique_ptr<StrategyPlugin> MakeDotProduct();
std::unique_ptr<StrategyPlugin> MakeGpuPacking();
std::unique_ptr<StrategyPlugin> MakeGpuClustering();
std::unique_ptr<StrategyPlugin> MakeFgd(const PluginEnv& env);
std::unique_ptr<StrategyPlugin> MakeFgdPack(const PluginEnv& env);
std::unique_ptr<StrategyPlugin> MakeRandom(const PluginEnv& env);

}  // namespace gpupool::placement
