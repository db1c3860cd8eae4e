// EngineImpl: inventory, compile, select. Gang and victim search live in gang.cc and
// preemption.cc; the public facade in engine_facade.cc.
#include <algorithm>
#include <map>

#include "placement/accounting.h"
#include "placement/engine_impl.h"
#include "placement/fit.h"
#include "placement/topology.h"

namespace gpupool::placement {
namespace {

// Indexes kept at once; past this many shapes the cache starts over (bounded memory).
constexpr size_t kMaxIndexes = 4096;
// After SetWorkload, how many stale cached scores one decision recomputes (score_index.h). Pools
// up to this size are rescanned at the first decision, as before (the trace's 1,213 nodes place
// exactly as with a full rescan); a 50,000-node pool spreads the rescan over 13 decisions of each
// shape instead of stalling one (bench/placement_latency, BM_PlaceLearning push_ms).
constexpr size_t kStaleRefreshPerDecision = 4096;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

int64_t FloorPow2(int64_t v) {
  if (v <= 0) return 0;
  int64_t p = 1;
  while (p <= v / 2) p *= 2;
  return p;
}

// Without a configured workload, fragmentation is measured against a generic mix: quarter,
// half and three-quarter shares and 1, 2, 4, 8 whole GPUs, equally likely.
std::vector<FragClass> DefaultWorkload() {
  std::vector<FragClass> w;
  auto add = [&](int32_t milli, int count) {
    FragClass c;
    c.gpu_milli = milli;
    c.gpu_count = count;
    c.p = 1.0 / 7;
    c.inv_gpu = 1.0 / milli;
    w.push_back(c);
  };
  for (int32_t share : {250, 500, 750}) add(share, 1);
  for (int k : {1, 2, 4, 8}) add(1000, k);
  return w;
}

}  // namespace

size_t ShapeKeyHash::operator()(const ShapeKey& k) const {
  uint64_t h = static_cast<uint64_t>(k.kind);
  for (uint64_t v :
       {static_cast<uint64_t>(k.share_milli), static_cast<uint64_t>(k.gpu_count),
        static_cast<uint64_t>(k.mig_profile), static_cast<uint64_t>(k.cpu_milli),
        static_cast<uint64_t>(k.memory_mib), static_cast<uint64_t>(k.per_device.milli_tflops),
        static_cast<uint64_t>(k.per_device.vram_mib), k.model_mask})
    h = Mix(h ^ (v + 0x9E3779B97F4A7C15ULL));
  return static_cast<size_t>(h);
}

EngineImpl::EngineImpl(PoolPolicy p) : policy(p), workload_(DefaultWorkload()) {
  plugin_ = MakePlugin(policy.strategy, PluginEnv{&workload_, policy.tie_seed, &pool_shape_});
}

int EngineImpl::Intern(std::unordered_map<std::string, int>& table, const std::string& name) {
  auto [it, inserted] = table.emplace(name, static_cast<int>(table.size()));
  return it->second;
}

CompiledRequest EngineImpl::Compile(const Request& r) const {
  CompiledRequest c;
  c.kind = r.kind;
  c.cpu_milli = r.cpu_milli;
  c.memory_mib = r.memory_mib;
  c.gpu_count = r.kind == RequestKind::kMig ? 1 : r.gpu_count;
  if (c.kind == RequestKind::kCpuOnly || c.gpu_count <= 0) {
    c.kind = RequestKind::kCpuOnly;
    c.gpu_count = 0;
  }
  c.slot_ok = c.kind == RequestKind::kFractional || c.kind == RequestKind::kTimeSlice ||
              c.kind == RequestKind::kMig;
  c.slot_caps = policy.shared_requires;
  // The pool's sharing mode decides what a fractional request really takes.
  if (c.kind == RequestKind::kFractional && policy.sharing == SharingMode::kExclusive)
    c.kind = RequestKind::kWholeGpu;
  if (c.kind == RequestKind::kFractional && policy.sharing == SharingMode::kTimeSliced)
    c.kind = RequestKind::kTimeSlice;
  if (c.kind == RequestKind::kFractional || c.kind == RequestKind::kTimeSlice)
    c.needs_caps = policy.shared_requires;
  if (c.kind == RequestKind::kFractional) {
    c.per_device = r.per_device;
    c.share_milli = r.share_milli;
    c.gpu_milli = r.share_milli > 0 ? r.share_milli : 0;
  } else if (c.kind != RequestKind::kCpuOnly) {
    c.gpu_milli = 1000;
  }
  if (c.kind == RequestKind::kMig) {
    auto it = mig_profiles_.find(r.mig_profile);
    c.mig_profile = it == mig_profiles_.end() ? -2 : it->second;
  }
  if (!r.allowed_models.empty()) {
    c.model_mask = 0;
    for (const std::string& m : r.allowed_models) {
      auto it = models_.find(m);
      if (it != models_.end()) c.model_mask |= uint64_t{1} << (it->second & 63);
    }
    c.unknown_model = c.model_mask == 0;
  }
  return c;
}

bool EngineImpl::Evaluate(const NodeState& node, const CompiledRequest& req, Scored* out) const {
  DeviceSet candidates;
  if (FilterNode(node, req, &candidates, nullptr) != Reject::kNone) return false;
  return plugin_->Score(node, req, candidates, out);
}

namespace {
bool Avoided(const std::vector<char>& avoid, int slot) {
  return !avoid.empty() && avoid[static_cast<size_t>(slot)] != 0;
}
}  // namespace

std::vector<char> EngineImpl::AvoidSlots(const std::vector<std::string>& names) const {
  std::vector<char> avoid;
  for (const std::string& name : names) {
    const NodeState* n = FindNode(name);
    if (n == nullptr) continue;
    avoid.resize(nodes.size(), 0);
    avoid[static_cast<size_t>(n->slot)] = 1;
  }
  return avoid;
}

// Missing bytes per slot for Request::warm (absent: the node misses everything).
std::map<int, int64_t> EngineImpl::WarmSlots(const std::vector<WarmNode>& warm) const {
  std::map<int, int64_t> out;
  for (const WarmNode& w : warm) {
    const NodeState* n = FindNode(w.node);
    if (n == nullptr) continue;
    auto [it, added] = out.emplace(n->slot, w.missing_bytes);
    if (!added) it->second = std::min(it->second, w.missing_bytes);
  }
  return out;
}

int EngineImpl::Select(const CompiledRequest& req, Scored* scored, const std::vector<char>& avoid,
                       const std::vector<WarmNode>& warm) const {
  if (req.gpu_count > kMaxDevicesPerNode || (req.kind == RequestKind::kMig && req.mig_profile < 0))
    return -1;
  const std::map<int, int64_t> warm_slots = WarmSlots(warm);
  const auto missing = [&](int slot) {
    auto it = warm_slots.find(slot);
    return it == warm_slots.end() ? INT64_MAX : it->second;
  };
  if (!plugin_->Cacheable()) {
    int best = -1;
    Scored s;
    for (const NodeState& n : nodes) {
      if (Avoided(avoid, n.slot) || !Evaluate(n, req, &s)) continue;
      if (best < 0 || s.score > scored->score ||
          (s.score == scored->score && missing(n.slot) < missing(best))) {
        best = n.slot, *scored = s;
      }
    }
    return best;
  }
  // Host memory enters the shape rounded down to a power of two: few extra shapes, yet the
  // cached feasibility already excludes most nodes short of memory (else the search below would
  // mask them one by one — costly when the best-scored nodes are the fullest). Strategies that
  // score memory see the rounded value; fit is always checked exactly on the way out.
  const int64_t memory_key = FloorPow2(req.memory_mib);
  const ShapeKey key{req.kind,      req.share_milli, req.gpu_count,  req.mig_profile,
                     req.cpu_milli, memory_key,      req.per_device, req.model_mask};
  auto found = index_of_.find(key);
  if (found == index_of_.end()) {
    if (indexes_.size() >= kMaxIndexes) ClearIndexes();
    found = index_of_.emplace(key, indexes_.size()).first;
    indexes_.push_back(std::make_unique<ScoreIndex>());
    indexes_.back()->log_cursor = touch_log_.size();  // a new index starts all dirty anyway
  }
  ScoreIndex& index = *indexes_[found->second];
  CatchUp(index);
  index.Resize(static_cast<int>(nodes.size()));
  CompiledRequest shape = req;
  shape.memory_mib = memory_key;
  // Untouched nodes of one hardware type score alike: evaluate one per type (a new shape's
  // first build is mostly such nodes).
  memo_.assign(type_ids_.size(), Memo{});
  index.Sync(
      [&](int slot, int64_t* score, uint64_t* tie) {
        const NodeState& n = nodes[static_cast<size_t>(slot)];
        *tie = n.tie_key;
        Memo* m = n.pristine ? &memo_[static_cast<size_t>(n.type)] : nullptr;
        if (m != nullptr && m->known) {
          *score = m->score;
          return m->feasible;
        }
        Scored s;
        const bool feasible = Evaluate(n, shape, &s);
        if (m != nullptr) *m = Memo{true, feasible, s.score};
        *score = s.score;
        return feasible;
      },
      kStaleRefreshPerDecision);
  const auto accept = [&](int s) {
    return !Avoided(avoid, s) && req.memory_mib <= nodes[static_cast<size_t>(s)].mem_free();
  };
  const int slot = index.Best(accept);
  if (slot < 0) return -1;
  // A warm node that scores exactly as the best one does: packing cannot tell them apart, so
  // the one with the fewest bytes to fetch goes first (then the tie key). O(warm nodes).
  int warmest = slot;
  const int64_t best_score = index.ScoreOf(slot);
  for (const auto& [w, bytes] : warm_slots) {
    if (w == slot || index.ScoreOf(w) != best_score || !accept(w)) continue;
    const int64_t current = missing(warmest);
    if (bytes < current || (bytes == current && nodes[static_cast<size_t>(w)].tie_key <
                                                    nodes[static_cast<size_t>(warmest)].tie_key)) {
      warmest = w;
    }
  }
  if (warmest != slot && Evaluate(nodes[static_cast<size_t>(warmest)], req, scored)) {
    return warmest;
  }
  if (!Evaluate(nodes[static_cast<size_t>(slot)], req, scored)) return -1;
  return slot;
}

Decision EngineImpl::Place(const Request& request, PlaceOptions options,
                           const std::vector<char>& avoid) const {
  Decision d;
  const CompiledRequest req = Compile(request);
  Scored scored;
  const int slot = Select(req, &scored, avoid, request.warm);
  if (slot >= 0) {
    d.placed = true;
    d.score = scored.score;
    d.allocation = MakeAllocation(nodes[static_cast<size_t>(slot)], req, scored.devices);
  } else if (options.explain) {
    Explain(req, &d, avoid);
  }
  return d;
}

void EngineImpl::Explain(const CompiledRequest& req, Decision* d,
                         const std::vector<char>& avoid) const {
  if (req.gpu_count > kMaxDevicesPerNode) {
    d->rejections.push_back({"", "request: asks for " + std::to_string(req.gpu_count) +
                                     " devices; the most one node can have is " +
                                     std::to_string(kMaxDevicesPerNode)});
    d->rejection_counts.emplace_back("request", 1);
    return;
  }
  std::map<std::string, int> counts;
  for (const NodeState& n : nodes) {
    if (!n.live) continue;
    if (Avoided(avoid, n.slot)) {
      ++counts["reserved"];
      if (static_cast<int>(d->rejections.size()) < Decision::kMaxRejections)
        d->rejections.push_back({n.name, "reserved: kept for other work"});
      continue;
    }
    DeviceSet candidates;
    std::string why;
    Reject r = FilterNode(n, req, &candidates, &why);
    if (r == Reject::kNone) {
      Scored s;
      if (plugin_->Score(n, req, candidates, &s)) continue;  // cannot happen unless a race
      r = Reject::kSpill;
      why = "spill: the chosen devices would exceed the node's host-RAM spill budget";
    }
    ++counts[std::string(RejectName(r))];
    if (static_cast<int>(d->rejections.size()) < Decision::kMaxRejections)
      d->rejections.push_back({n.name, why});
  }
  if (nodes.empty() || live_nodes == 0) counts["no-nodes"] = 1;
  d->rejection_counts.assign(counts.begin(), counts.end());
}

DeviceState EngineImpl::MakeDevice(const DeviceSpec& spec) {
  DeviceState d;
  d.id = spec.id;
  d.model = Intern(models_, spec.model);
  d.mig_profile = spec.mig_profile.empty() ? -1 : Intern(mig_profiles_, spec.mig_profile);
  d.healthy = spec.healthy;
  d.physical = spec.physical;
  d.offered = Offered(spec.physical, policy.compute, policy.memory);
  if (spec.time_slice_slots > 0)
    d.slots_total = spec.time_slice_slots;
  else if (policy.sharing == SharingMode::kTimeSliced && spec.mig_profile.empty())
    d.slots_total = std::max(policy.replicas, 1);
  return d;
}

int EngineImpl::TypeOf(const NodeSpec& spec) {
  // Everything a score can depend on in an untouched node, as text.
  std::string sig = std::to_string(spec.cpu_milli) + "/" + std::to_string(spec.memory_mib) + "/" +
                    std::to_string(spec.spill_budget_mib) + "/" + std::to_string(spec.capabilities);
  for (const DeviceSpec& d : spec.devices)
    sig += "|" + d.model + ":" + std::to_string(d.physical.milli_tflops) + ":" +
           std::to_string(d.physical.vram_mib) + ":" + d.mig_profile + ":" +
           std::to_string(d.time_slice_slots);
  for (const Link& l : spec.links)
    sig += "#" + std::to_string(l.a) + "-" + std::to_string(l.b) + ":" +
           std::to_string(static_cast<int>(l.kind));
  return Intern(type_ids_, sig);
}

Status EngineImpl::AddNode(const NodeSpec& spec) {
  if (spec.name.empty()) return Status::InvalidArgument("node: empty name");
  if (by_name_.count(spec.name) != 0)
    return Status::AlreadyExists("node '" + spec.name + "' already in the pool");
  if (spec.cpu_milli < 0 || spec.memory_mib < 0 || spec.spill_budget_mib < 0)
    return Status::InvalidArgument("node '" + spec.name +
                                   "': negative cpu, memory or spill budget");
  if (spec.devices.size() > static_cast<size_t>(kMaxDevicesPerNode))
    return Status::InvalidArgument("node '" + spec.name + "': more than " +
                                   std::to_string(kMaxDevicesPerNode) + " devices");
  const int n = static_cast<int>(spec.devices.size());
  for (const Link& l : spec.links)
    if (l.a < 0 || l.b < 0 || l.a >= n || l.b >= n || l.a == l.b)
      return Status::InvalidArgument("node '" + spec.name + "': link " + std::to_string(l.a) + "–" +
                                     std::to_string(l.b) + " names no pair of devices");
  NodeState node;
  node.name = spec.name;
  node.cpu_total = spec.cpu_milli;
  node.mem_total = spec.memory_mib;
  node.spill_budget = spec.spill_budget_mib;
  node.caps = spec.capabilities;
  for (const DeviceSpec& ds : spec.devices) {
    if (!ds.physical.IsNonNegative())
      return Status::InvalidArgument("node '" + spec.name + "': device '" + ds.id +
                                     "' has negative capacity");
    for (const DeviceState& other : node.devices)
      if (other.id == ds.id)
        return Status::InvalidArgument("node '" + spec.name + "': duplicate device id '" + ds.id +
                                       "'");
    node.devices.push_back(MakeDevice(ds));
  }
  node.dist = BuildDistances(n, spec.links);
  node.type = TypeOf(spec);
  node.slot = static_cast<int>(nodes.size());
  node.tie_key = policy.tie_seed == 0 ? static_cast<uint64_t>(node.slot)
                                      : Mix(policy.tie_seed ^ Fnv1a(spec.name));
  by_name_.emplace(spec.name, node.slot);
  nodes.push_back(std::move(node));
  ++live_nodes;
  ++inventory_version;
  Touch(nodes.back());
  return Status::Ok();
}

Status EngineImpl::RemoveNode(std::string_view name) {
  NodeState* n = FindNode(name);
  if (n == nullptr) return Status::NotFound("node '" + std::string(name) + "' not in the pool");
  n->live = false;
  by_name_.erase(n->name);
  --live_nodes;
  ++inventory_version;
  Touch(*n);
  return Status::Ok();
}

Status EngineImpl::SetSchedulable(std::string_view name, bool schedulable) {
  NodeState* n = FindNode(name);
  if (n == nullptr) return Status::NotFound("node '" + std::string(name) + "' not in the pool");
  n->schedulable = schedulable;
  Touch(*n);
  return Status::Ok();
}

Status EngineImpl::SetDeviceHealthy(std::string_view node, std::string_view device_id,
                                    bool healthy) {
  NodeState* n = FindNode(node);
  if (n == nullptr) return Status::NotFound("node '" + std::string(node) + "' not in the pool");
  for (DeviceState& d : n->devices) {
    if (d.id != device_id) continue;
    d.healthy = healthy;
    Touch(*n);
    return Status::Ok();
  }
  return Status::NotFound("node '" + std::string(node) + "': no device '" + std::string(device_id) +
                          "'");
}

Status EngineImpl::Commit(const Allocation& a) {
  NodeState* n = FindNode(a.node);
  if (n == nullptr) return Status::NotFound("node '" + a.node + "' not in the pool");
  GPUPOOL_RETURN_IF_ERROR(CheckApply(*n, a));
  Apply(*n, a, NextVersion());  // refreshes the node
  MarkDirty(n->slot);
  return Status::Ok();
}

Status EngineImpl::Release(const Allocation& a) {
  NodeState* n = FindNode(a.node);
  if (n == nullptr) return Status::NotFound("node '" + a.node + "' not in the pool");
  GPUPOOL_RETURN_IF_ERROR(CheckUnapply(*n, a));
  Unapply(*n, a, NextVersion());  // refreshes the node
  MarkDirty(n->slot);
  return Status::Ok();
}

void EngineImpl::Touch(NodeState& node) {
  node.Refresh(NextVersion());
  MarkDirty(node.slot);
}

void EngineImpl::MarkDirty(int slot) {
  touch_log_.push_back(slot);
  // Bound the log: past a few times the node count, let every index read it and start over.
  if (touch_log_.size() > 4 * nodes.size() + 1024) {
    for (auto& index : indexes_) CatchUp(*index);
    touch_log_.clear();
    for (auto& index : indexes_) index->log_cursor = 0;
  }
}

void EngineImpl::CatchUp(ScoreIndex& index) const {
  for (size_t i = index.log_cursor; i < touch_log_.size(); ++i) index.MarkDirty(touch_log_[i]);
  index.log_cursor = touch_log_.size();
}

NodeState* EngineImpl::FindNode(std::string_view name) {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &nodes[static_cast<size_t>(it->second)];
}

const NodeState* EngineImpl::FindNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &nodes[static_cast<size_t>(it->second)];
}

}  // namespace gpupool::placement
