#include "placement/fit.h"

#include <algorithm>

#include "placement/topology.h"

namespace gpupool::placement {
namespace {

std::string DeviceName(const DeviceState& d, int index) {
  return "GPU " + std::to_string(index) + (d.id.empty() ? "" : " (" + d.id + ")");
}

// One slot of a time-sliced device (or MIG instance): the node must enforce what the pool asks of
// shared work, and a slot must be free.
template <typename Name, typename Say>
Reject CheckSlot(const NodeState& node, const DeviceState& d, const CompiledRequest& r,
                 const Name& name, const Say& say) {
  if ((r.slot_caps & ~node.caps) != 0)
    return say(Reject::kCapability, [&] {
      return "capability: cannot enforce " + CapabilityList(r.slot_caps & ~node.caps) +
             " on the time-sliced " + name() + " (the pool requires it for shared work)";
    });
  if (!d.allocated.IsZero() && d.slots_used == 0)
    return say(Reject::kSlots, [&] { return "slots: " + name() + " is shared by amount"; });
  if (d.slots_used >= d.slots_total)
    return say(Reject::kSlots, [&] { return "slots: need 1, free 0 on " + name(); });
  return Reject::kNone;
}

// One device against one request; kNone when it can take its part of the request. The reason
// text is built only when `why` is given: the hot path passes null.
Reject CheckDevice(const NodeState& node, const DeviceState& d, int index, const CompiledRequest& r,
                   std::string* why) {
  auto say = [&](Reject code, auto&& make) {
    if (why != nullptr) *why = make();
    return code;
  };
  auto name = [&] { return DeviceName(d, index); };
  if (!d.healthy) return say(Reject::kDevices, [&] { return "devices: " + name() + " unhealthy"; });
  if (r.kind == RequestKind::kMig) {
    if (d.mig_profile != r.mig_profile) return Reject::kMig;
    if (d.slots_total > 0) return CheckSlot(node, d, r, name, say);
    if (!d.Idle()) return say(Reject::kMig, [&] { return "mig: " + name() + " is taken"; });
    return Reject::kNone;
  }
  if (d.mig_profile >= 0) return Reject::kMig;  // MIG instances only serve MIG requests
  if (!r.ModelAllowed(d.model))
    return say(Reject::kModel, [&] { return "model: " + name() + " is not an allowed model"; });
  if (d.exclusive_taken)
    return say(Reject::kDevices, [&] { return "devices: " + name() + " is taken whole"; });
  if (d.slots_total > 0) {
    if (!r.slot_ok)
      return say(Reject::kSlots, [&] {
        return "slots: " + name() + " is time-sliced into " + std::to_string(d.slots_total) +
               " slots; a whole GPU needs an unsliced one";
      });
    if (r.kind == RequestKind::kFractional) {
      // A share larger than one slot's would not be held to it: the slot is the enforced limit.
      const Resources need = NeedOn(d, r);
      const Resources slot = SlotShare(d);
      if (need.vram_mib > slot.vram_mib || need.milli_tflops > slot.milli_tflops)
        return say(Reject::kSlots, [&] {
          return "slots: need " + need.ToString() + "; a slot of " + name() + " holds " +
                 slot.ToString();
        });
    }
    return CheckSlot(node, d, r, name, say);
  }
  if (r.kind == RequestKind::kWholeGpu) {
    if (!d.Idle())
      return say(Reject::kDevices, [&] { return "devices: " + name() + " is in use"; });
    return Reject::kNone;
  }
  if (r.kind == RequestKind::kTimeSlice)
    return say(Reject::kSlots, [&] { return "slots: " + name() + " is not time-sliced"; });
  if (d.slots_used > 0)
    return say(Reject::kSlots, [&] { return "slots: " + name() + " is time-sliced"; });
  const Resources need = NeedOn(d, r);
  const Resources free = d.offered - d.allocated;
  if (need.vram_mib > free.vram_mib)
    return say(Reject::kVram, [&] {
      return "vram: need " + std::to_string(need.vram_mib) + " MiB, free " +
             std::to_string(free.vram_mib) + " MiB on " + name();
    });
  if (need.milli_tflops > free.milli_tflops)
    return say(Reject::kCompute, [&] {
      return "compute: need " + FormatTflops(need.milli_tflops) + " TFLOPS, free " +
             FormatTflops(free.milli_tflops) + " TFLOPS on " + name();
    });
  const int64_t spill = SpillDelta(d, need);
  if (node.spill_used + spill > node.spill_budget)
    return say(Reject::kSpill, [&] {
      return "spill: need " + std::to_string(spill) + " MiB of host RAM to back VRAM on " + name() +
             ", budget left " + std::to_string(node.spill_budget - node.spill_used) + " MiB";
    });
  return Reject::kNone;
}

}  // namespace

std::string_view RejectName(Reject r) {
  switch (r) {
    case Reject::kNone:
      return "none";
    case Reject::kUnschedulable:
      return "unschedulable";
    case Reject::kCpu:
      return "cpu";
    case Reject::kMemory:
      return "memory";
    case Reject::kModel:
      return "model";
    case Reject::kCompute:
      return "compute";
    case Reject::kVram:
      return "vram";
    case Reject::kSpill:
      return "spill";
    case Reject::kDevices:
      return "devices";
    case Reject::kMig:
      return "mig";
    case Reject::kSlots:
      return "slots";
    case Reject::kCapability:
      return "capability";
    case Reject::kCount:
      break;
  }
  return "unknown";
}

Resources SlotShare(const DeviceState& d) {
  const int64_t n = std::max(d.slots_total, 1);
  return Resources{d.offered.milli_tflops / n, d.offered.vram_mib / n};
}

Resources GrantedOn(const DeviceState& d, const CompiledRequest& r) {
  if (d.slots_total > 0) return SlotShare(d);
  if (r.kind == RequestKind::kFractional) return NeedOn(d, r);
  // The whole card: all offered compute, the physical VRAM (no spill).
  return Resources{d.offered.milli_tflops, std::min(d.offered.vram_mib, d.physical.vram_mib)};
}

Resources NeedOn(const DeviceState& d, const CompiledRequest& r) {
  if (r.share_milli > 0) {
    // Floor, so shares that add up to a whole device always fit on it.
    return Resources{d.physical.milli_tflops * r.share_milli / 1000,
                     d.physical.vram_mib * r.share_milli / 1000};
  }
  return r.per_device;
}

int32_t NeedMilli(const DeviceState& d, const CompiledRequest& r) {
  if (r.share_milli > 0) return r.share_milli;
  if (r.kind != RequestKind::kFractional) return 1000;
  int64_t m = 0;
  const Resources& p = d.physical;
  if (p.milli_tflops > 0)
    m = std::max(m, (r.per_device.milli_tflops * 1000 + p.milli_tflops - 1) / p.milli_tflops);
  if (p.vram_mib > 0) m = std::max(m, (r.per_device.vram_mib * 1000 + p.vram_mib - 1) / p.vram_mib);
  return static_cast<int32_t>(m);
}

int64_t SpillDelta(const DeviceState& d, const Resources& need) {
  const int64_t after = d.allocated.vram_mib + need.vram_mib - d.physical.vram_mib;
  return std::max<int64_t>(after, 0) - d.Spill();
}

Reject FilterNode(const NodeState& node, const CompiledRequest& req, DeviceSet* candidates,
                  std::string* why) {
  auto say = [&](Reject code, auto&& make) {
    if (why != nullptr) *why = make();
    return code;
  };
  if (!node.Usable())
    return say(Reject::kUnschedulable, [] { return "unschedulable: node is cordoned"; });
  if ((req.needs_caps & ~node.caps) != 0)
    return say(Reject::kCapability, [&] {
      return "capability: cannot enforce " + CapabilityList(req.needs_caps & ~node.caps) +
             " (the pool requires it for shared work)";
    });
  if (req.cpu_milli > node.cpu_free())
    return say(Reject::kCpu, [&] {
      return "cpu: need " + std::to_string(req.cpu_milli) + " milli-cores, free " +
             std::to_string(node.cpu_free());
    });
  if (req.memory_mib > node.mem_free())
    return say(Reject::kMemory, [&] {
      return "memory: need " + std::to_string(req.memory_mib) + " MiB, free " +
             std::to_string(node.mem_free()) + " MiB";
    });
  candidates->n = 0;
  if (!req.NeedsDevices()) return Reject::kNone;
  if (req.unknown_model)
    return say(Reject::kModel, [] { return "model: no node in the pool has an allowed model"; });
  // Keep the reason of the most promising device that failed: the one a person looks at first.
  Reject best_reason = Reject::kNone;
  int32_t best_free = -1;
  std::string best_why;
  std::string text;
  for (int i = 0; i < static_cast<int>(node.devices.size()); ++i) {
    const DeviceState& d = node.devices[static_cast<size_t>(i)];
    const Reject r = CheckDevice(node, d, i, req, why != nullptr ? &text : nullptr);
    if (r == Reject::kNone) {
      candidates->Push(i);
    } else if (r != Reject::kMig ||
               (req.kind == RequestKind::kMig && d.mig_profile == req.mig_profile)) {
      // (a device of another MIG profile, or none, says nothing a person could act on)
      if (d.free_milli > best_free) {
        best_free = d.free_milli;
        best_reason = r;
        best_why = text;
      }
    }
  }
  if (candidates->n >= req.gpu_count) return Reject::kNone;
  if (req.gpu_count == 1 && best_reason != Reject::kNone) {
    return say(best_reason, [&] { return best_why; });
  }
  const Reject code = req.kind == RequestKind::kMig ? Reject::kMig : Reject::kDevices;
  return say(code, [&] {
    return std::string(RejectName(code)) + ": need " + std::to_string(req.gpu_count) +
           " device(s), " + std::to_string(candidates->n) + " of " +
           std::to_string(node.devices.size()) + " can take it";
  });
}

bool SpillFits(const NodeState& node, const CompiledRequest& req, const DeviceSet& chosen) {
  int64_t spill = 0;
  for (int k = 0; k < chosen.n; ++k) {
    const DeviceState& d = node.devices[static_cast<size_t>(chosen.idx[static_cast<size_t>(k)])];
    if (req.kind == RequestKind::kFractional || d.slots_total > 0)
      spill += SpillDelta(d, GrantedOn(d, req));
  }
  return node.spill_used + spill <= node.spill_budget;
}

bool ChooseDevices(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
                   DeviceSet* chosen) {
  chosen->n = 0;
  if (!req.NeedsDevices()) return true;
  if (req.kind == RequestKind::kWholeGpu || req.gpu_count > 1) {
    BestConnectedSet(node, candidates, req.gpu_count, chosen);
    return SpillFits(node, req, *chosen);
  }
  // One device: the fullest that fits (least free share; most slots used), then lowest index.
  int best = -1;
  for (int k = 0; k < candidates.n; ++k) {
    const int i = candidates.idx[static_cast<size_t>(k)];
    if (best < 0) {
      best = i;
      continue;
    }
    const DeviceState& a = node.devices[static_cast<size_t>(i)];
    const DeviceState& b = node.devices[static_cast<size_t>(best)];
    const bool better = req.kind == RequestKind::kTimeSlice ? a.slots_used > b.slots_used
                                                            : a.free_milli < b.free_milli;
    if (better) best = i;
  }
  chosen->Push(best);
  return SpillFits(node, req, *chosen);
}

}  // namespace gpupool::placement
