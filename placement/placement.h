// placement: where a task goes. The public API of the placement engine.
//
// One Engine per pool. The scheduler feeds it inventory events (AddNode, RemoveNode,
// SetSchedulable, SetDeviceHealthy) and allocation events (Commit, Release), and asks it
// questions (Place, PlaceGang, FindVictims, Capacity). Answers are values: a Decision names a
// node, the devices with the exact amounts granted, and — when nothing fits — why each node was
// rejected. Place, PlaceGang and FindVictims never change what is allocated; only Commit and
// Release do, so the scheduler can persist a decision first and apply it after.
//
// Pipeline per request: compile (strings → typed ids, once) → filter (per node, a reason per
// rejection) → score (the pool's Strategy plugin; higher wins) → select (best score; ties go to
// the node with the fewest bytes still to fetch (Request::warm), then to the node with the
// smallest tie key — insertion order, or a seeded permutation when PoolPolicy::tie_seed != 0).
// Scores are cached per node and request shape and recomputed only for nodes touched since the last
// query, so a decision does not scan every node.
//
// Invariants (checked by tests/placement property tests):
//  * a device is never granted more than it offers: Σ granted ≤ physical × ratio / 1000 on each of
//    compute and VRAM; whole-device, MIG and time-slice grants are exclusive as documented below;
//  * VRAM granted beyond a device's physical VRAM ("spill") is backed by host RAM; the sum of
//    spills on a node never exceeds NodeSpec::spill_budget_mib (with no budget, physical VRAM is
//    never promised twice, whatever the memory ratio);
//  * Release(a) after Commit(a) restores every counter exactly.
//
// Pure: no I/O, no clocks, no threads, no global randomness (the Random strategy and the tie
// order draw from PoolPolicy::tie_seed). Thread safety: none; one owner calls it (the scheduler's
// strand, or the simulator). Place is logically const but refreshes internal caches.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "placement/strategy.h"
#include "pool/capabilities.h"
#include "pool/inventory.h"
#include "pool/resources.h"

namespace gpupool::placement {

// Interconnect between two devices of a node (pool/inventory.h, shared with the agent and the
// scheduler). Devices with no link listed talk through the system (kSystem).
using LinkKind = ::gpupool::LinkKind;

struct Link {
  int a = 0;  // device indices into NodeSpec::devices
  int b = 0;
  LinkKind kind = LinkKind::kSystem;
};

struct DeviceSpec {
  std::string id;           // unique within the node (UUID, or "GPU-3/mig-1g.10gb-0")
  std::string model;        // catalog model name, e.g. "A100-80GB"
  Resources physical;       // what the hardware has
  std::string mig_profile;  // non-empty: this device is a MIG instance of that profile
  // > 0: the device (or MIG instance) is time-sliced into that many slots, whatever the pool's
  // sharing mode: a shared request (fractional, time-slice, or a MIG request for this instance's
  // profile) takes one slot and its share, a request for whole GPUs never lands on it. 0: the
  // pool decides (PoolPolicy::replicas under kTimeSliced, unsliced otherwise).
  int time_slice_slots = 0;
  bool healthy = true;
};

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t spill_budget_mib = 0;  // host RAM set aside to back VRAM overcommit; not in memory_mib
  std::vector<DeviceSpec> devices;
  std::vector<Link> links;
  std::vector<std::pair<std::string, std::string>> labels;
  // What the node's agent enforces (pool/capabilities.h); checked against
  // PoolPolicy::shared_requires for shared work.
  CapabilityMask capabilities = 0;
};

// Exclusive, fractional or time-sliced (pool/inventory.h).
using SharingMode = ::gpupool::SharingMode;

// One workload class for fragmentation-aware strategies: a request shape and how often it is
// expected (weights need not sum to 1).
struct WorkloadClass;

struct PoolPolicy {
  Strategy strategy = Strategy::kFirstFit;
  Ratio compute;  // overcommit of compute, per-mille
  Ratio memory;   // overcommit of VRAM, per-mille
  SharingMode sharing = SharingMode::kFractional;
  int replicas = 1;       // time-slice slots per device under kTimeSliced
  uint64_t tie_seed = 0;  // 0: ties go to the earliest added node; else a seeded order
  // Capabilities a node must enforce to take shared work (fractional or time-sliced requests):
  // a slice is only sold where the node can hold a tenant to it. Whole GPUs, MIG instances and
  // CPU-only requests do not need them.
  CapabilityMask shared_requires = 0;
};

enum class RequestKind : uint8_t {
  kCpuOnly,     // no device; cpu and memory only
  kFractional,  // gpu_count devices, each with per_device (or share_milli) free
  kWholeGpu,    // gpu_count completely free devices
  kMig,         // one free MIG instance of mig_profile
  kTimeSlice,   // one time-slice slot
};

// A node that already holds some of what a task must fetch before it starts (its image's
// layers), and how many bytes it would still fetch.
struct WarmNode {
  std::string node;
  int64_t missing_bytes = 0;
};

struct Request {
  RequestKind kind = RequestKind::kFractional;
  // Per-device need. When share_milli > 0 it wins: the need is that share of the chosen device's
  // physical compute and VRAM (floor), i.e. "0.47 of whatever GPU it lands on" (traces).
  Resources per_device;
  int32_t share_milli = 0;
  int gpu_count = 1;
  std::vector<std::string> allowed_models;  // empty: any model
  std::string mig_profile;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // Cold-start locality: among the nodes that score exactly as well as the best (packing is
  // indifferent between them), the one with the fewest missing bytes wins; a node not listed
  // misses everything. Never trades a better score for a warmer node. Single placements only
  // (Place, PlaceAvoiding); gangs ignore it.
  std::vector<WarmNode> warm;
};

struct Grant {
  std::string device_id;
  int device_index = -1;   // index into the node's NodeSpec::devices
  Resources amount;        // compute and VRAM granted (offered units)
  int slots = 0;           // time-slice slots taken
  bool exclusive = false;  // the whole device (whole-GPU, MIG, exclusive pools)
  friend bool operator==(const Grant&, const Grant&) = default;
};

// A claim on one node: what Commit applies and Release gives back. Persist it as is.
struct Allocation {
  std::string node;
  std::vector<Grant> grants;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

struct NodeRejection {
  std::string node;
  std::string reason;  // "vram: need 40960 MiB, free 24576 MiB on GPU 3"
};

struct Decision {
  bool placed = false;
  Allocation allocation;  // valid when placed
  int64_t score = 0;
  // When not placed (and PlaceOptions::explain): the first kMaxRejections node reasons and a
  // count per reason kind ("cpu", "memory", "vram", ...), so "why pending" stays bounded.
  std::vector<NodeRejection> rejections;
  std::vector<std::pair<std::string, int>> rejection_counts;
  static constexpr int kMaxRejections = 10;
};

struct PlaceOptions {
  bool explain = true;  // fill Decision::rejections when nothing fits (costs a scan)
};

// A task the scheduler has running, as FindVictims sees it. Plain numbers, no clocks.
struct RunningTask {
  std::string task_id;
  Allocation allocation;
  int32_t priority = 0;   // higher is more important
  int64_t work_lost = 0;  // what preempting it costs (e.g. seconds since its last checkpoint)
};

struct VictimSet {
  bool found = false;
  std::vector<std::string> task_ids;  // evict these…
  Decision decision;                  // …and this placement then fits
};

struct DeviceCapacity {
  std::string id;
  std::string model;
  std::string mig_profile;
  bool healthy = true;
  Resources physical;
  Resources offered;
  Resources allocated;
  int slots_total = 0;
  int slots_used = 0;
  bool exclusive_taken = false;
};

struct NodeCapacity {
  std::string name;
  bool schedulable = true;
  int64_t cpu_milli = 0, cpu_allocated = 0;
  int64_t memory_mib = 0, memory_allocated = 0;
  int64_t spill_budget_mib = 0, spill_used_mib = 0;
  std::vector<DeviceCapacity> devices;
};

struct WorkloadClass {
  Request shape;
  double weight = 1.0;
};

class EngineImpl;

class Engine {
 public:
  explicit Engine(PoolPolicy policy);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const PoolPolicy& policy() const;

  // The target workload for fragmentation-aware strategies (fgd, fgd-pack): typical request
  // shapes (share_milli or whole GPUs; cpu_milli and memory_mib) with their weights. Feed it the
  // recent mix; without one they use a generic mix (¼, ½, ¾ shares; 1, 2, 4, 8 whole GPUs).
  // Call it after AddNode: each class's reach (the share of nodes that could host it) is taken
  // from the nodes present. Clears the score caches.
  void SetWorkload(std::vector<WorkloadClass> classes);
  // Whether SetWorkload was ever called, and whether nodes were added or removed since (the
  // reach it computed is then stale). WorkloadFeed (workload_feed.h) reads these.
  bool workload_given() const;
  bool inventory_changed_since_workload() const;

  // Inventory. AddNode fails on a duplicate or malformed node (bad link index, duplicate device
  // id). RemoveNode forgets the node and everything allocated on it.
  Status AddNode(const NodeSpec& node);
  Status RemoveNode(std::string_view name);
  Status SetSchedulable(std::string_view name, bool schedulable);
  Status SetDeviceHealthy(std::string_view node, std::string_view device_id, bool healthy);

  // Best placement for `request` under the pool's strategy, or why none fits. Does not allocate.
  Decision Place(const Request& request, PlaceOptions options = {}) const;

  // Applies an allocation (from Place, or reloaded from the store). Fails, changing nothing, when
  // it no longer fits or names an unknown node or device.
  Status Commit(const Allocation& allocation);
  // Gives an allocation back. REQUIRES: it was committed and not released since.
  Status Release(const Allocation& allocation);

  // All-or-nothing: places the requests in order as if each earlier one were committed, then
  // undoes those tentative commits in reverse order. On success returns one allocation per
  // request that the caller commits (persist first, then Commit each); on failure the first
  // request that did not fit, with its reasons. Net effect on the engine: none.
  struct GangResult {
    bool placed = false;
    std::vector<Allocation> allocations;
    int failed_index = -1;
    Decision failed;
  };
  GangResult PlaceGang(std::span<const Request> requests);
  // Place and PlaceGang that must not use the nodes named in `avoid`, as if cordoned, without
  // changing the engine (so no cached score goes stale): the scheduler's starvation
  // reservations (scheduler/core_starvation.cc). Explain counts them under "reserved"; unknown
  // names are ignored.
  Decision PlaceAvoiding(const Request& request, const std::vector<std::string>& avoid,
                         PlaceOptions options = {}) const;
  GangResult PlaceGangAvoiding(std::span<const Request> requests,
                               const std::vector<std::string>& avoid);

  // The cheapest set of `running` tasks of lower priority than `priority` whose release makes
  // `request` fit on one node: fewest victims, then lowest highest-priority, then least total
  // work lost. Does not change the engine.
  VictimSet FindVictims(const Request& request, int32_t priority,
                        std::span<const RunningTask> running) const;

  std::vector<NodeCapacity> Capacity() const;
  Result<NodeCapacity> NodeCapacityOf(std::string_view name) const;
  int node_count() const;

 private:
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace gpupool::placement
