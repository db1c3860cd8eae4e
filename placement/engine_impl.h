// EngineImpl: the state behind placement::Engine (placement.h). Internal.
//
// Owns the node table (slots are stable; removed nodes stay as dead slots), the interned model
// and MIG profile names, the strategy plugin, the workload, and one ScoreIndex per request shape.
// Every change to a node goes through Touch(), which stamps a new version and marks the node
// dirty in every index. Thread safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "placement/placement.h"
#include "placement/plugin.h"
#include "placement/score_index.h"
#include "placement/state.h"

namespace gpupool::placement {

struct ShapeKey {
  RequestKind kind;
  int32_t share_milli;
  int gpu_count;
  int mig_profile;
  int64_t cpu_milli;
  int64_t memory_mib;  // 0 unless the strategy scores memory
  Resources per_device;
  uint64_t model_mask;
  friend bool operator==(const ShapeKey&, const ShapeKey&) = default;
};

struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const;
};

class EngineImpl {
 public:
  explicit EngineImpl(PoolPolicy policy);

  CompiledRequest Compile(const Request& r) const;
  // `avoid`: per slot, 1 for a node not to use (AvoidSlots; empty: none).
  Decision Place(const Request& request, PlaceOptions options,
                 const std::vector<char>& avoid = {}) const;
  // The best node for a compiled request: slot and scored devices, or -1.
  // `avoid`: per slot, 1 when PlaceOptions::avoid names the node (empty: none).
  int Select(const CompiledRequest& req, Scored* scored, const std::vector<char>& avoid = {},
             const std::vector<WarmNode>& warm = {}) const;
  void Explain(const CompiledRequest& req, Decision* d, const std::vector<char>& avoid) const;
  std::vector<char> AvoidSlots(const std::vector<std::string>& names) const;
  std::map<int, int64_t> WarmSlots(const std::vector<WarmNode>& warm) const;

  Status AddNode(const NodeSpec& spec);
  Status RemoveNode(std::string_view name);
  Status SetSchedulable(std::string_view name, bool schedulable);
  Status SetDeviceHealthy(std::string_view node, std::string_view device_id, bool healthy);
  Status Commit(const Allocation& a);
  Status Release(const Allocation& a);
  void SetWorkload(const std::vector<WorkloadClass>& classes);
  double Reach(const FragClass& f) const;
  // FragClass::model_share for every class, from one count of the live nodes' GPUs per model.
  void SetModelShares(std::vector<FragClass>* classes) const;

  NodeState* FindNode(std::string_view name);
  const NodeState* FindNode(std::string_view name) const;
  uint64_t NextVersion() const { return ++version_clock_; }
  // Scores `req` on one node (filter + score); false when it does not fit.
  bool Evaluate(const NodeState& node, const CompiledRequest& req, Scored* out) const;
  NodeCapacity CapacityOf(const NodeState& n) const;

  PoolPolicy policy;
  std::vector<NodeState> nodes;
  int live_nodes = 0;
  // Bumped by every AddNode and RemoveNode; SetWorkload notes the value it saw (reach depends
  // on the nodes). kNoWorkload: never given one.
  static constexpr uint64_t kNoWorkload = ~uint64_t{0};
  uint64_t inventory_version = 0;
  uint64_t workload_inventory = kNoWorkload;

 private:
  void Touch(NodeState& node);
  void MarkDirty(int slot);
  DeviceState MakeDevice(const DeviceSpec& spec);
  int Intern(std::unordered_map<std::string, int>& table, const std::string& name);
  int TypeOf(const NodeSpec& spec);

  struct Memo {
    bool known = false;
    bool feasible = false;
    int64_t score = 0;
  };

  std::unordered_map<std::string, int> by_name_;
  std::unordered_map<std::string, int> models_;
  std::unordered_map<std::string, int> mig_profiles_;
  std::vector<FragClass> workload_;
  PoolShape pool_shape_;
  std::unique_ptr<StrategyPlugin> plugin_;
  // One index per request shape: the map finds it, the vector is what Touch() walks (densely).
  mutable std::unordered_map<ShapeKey, size_t, ShapeKeyHash> index_of_;
  mutable std::vector<std::unique_ptr<ScoreIndex>> indexes_;
  // Nodes touched, in order. Each index reads it from its cursor when its shape is asked for,
  // so a change costs O(1), not a walk over every index.
  mutable std::vector<int> touch_log_;
  void CatchUp(ScoreIndex& index) const;
  void ClearIndexes() const {
    index_of_.clear();
    indexes_.clear();
    touch_log_.clear();
  }
  mutable uint64_t version_clock_ = 0;
  std::unordered_map<std::string, int> type_ids_;  // hardware signature → NodeState::type
  mutable std::vector<Memo> memo_;                 // per type, during one Sync
};

}  // namespace gpupool::placement
