// Core: time-slicing per device (issue 27; docs/placement.md, "Time-slicing per device"). An admin
// cuts one GPU or MIG instance into N slots whatever its pool's sharing mode, so a pool can mix
// whole, sliced and MIG GPUs. The change is refused while the device holds work (a slot count
// never changes under a running task), stored with an event, and only then applied: the node is
// rebuilt in its pool's engine from the book, its tasks re-committed.
#include "base/log.h"
#include "pool/capabilities.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

std::string SlotsMessage(int32_t slots, const std::string& by) {
  const std::string who = by.empty() ? std::string("an admin") : by;
  if (slots == 0) return "time-slicing cleared by " + who + " (the pool's default applies)";
  return "time-sliced into " + std::to_string(slots) + " slots by " + who;
}

}  // namespace

void Core::SetDeviceSlots(const std::string& node, const std::string& device, int32_t slots,
                          const std::string& by, Callback<NodeView> done) {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  if (slots < 0 || slots > kMaxDeviceSlots) {
    done(Status::InvalidArgument("slots: " + std::to_string(slots) + " is outside 0.." +
                                 std::to_string(kMaxDeviceSlots)));
    return;
  }
  auto n = s_->nodes.find(node);
  if (n == s_->nodes.end()) {
    done(Status::NotFound("node '" + node + "' not found"));
    return;
  }
  const NodeEntry& entry = n->second;
  if (!entry.device_index.contains(device)) {
    done(Status::NotFound("node '" + node + "': no device '" + device + "'"));
    return;
  }
  for (const DeviceRecord& d : entry.rec.devices) {
    if (d.parent_id == device) {
      done(Status::FailedPrecondition("device '" + device +
                                      "' is partitioned into MIG instances; set slots on an "
                                      "instance instead (" +
                                      d.id + ", ...)"));
      return;
    }
  }
  PoolEntry* pool = s_->FindPool(entry.rec.pool);
  if (pool == nullptr) {
    done(Status::FailedPrecondition("node '" + node + "' is in no known pool"));
    return;
  }
  if (s_->slots.Slots(node, device) == slots) {  // nothing to change
    done(s_->ViewOf(entry));
    return;
  }
  // A slot is shared work: the node must enforce what the pool requires of it.
  Result<CapabilityMask> required = CapabilityMaskOf(pool->rec.required_capabilities);
  const CapabilityMask missing =
      required.ok() ? *required & ~EnforcedCapabilities(entry.rec) : CapabilityMask{0};
  if (slots > 0 && missing != 0) {
    done(Status::FailedPrecondition("node '" + node + "' cannot enforce " +
                                    CapabilityList(missing) + ", which pool '" + pool->rec.name +
                                    "' requires of shared work; its device '" + device +
                                    "' cannot be time-sliced"));
    return;
  }
  Result<placement::NodeCapacity> cap = pool->engine->NodeCapacityOf(node);
  if (cap.ok()) {
    for (const placement::DeviceCapacity& d : cap->devices) {
      if (d.id != device) continue;
      if (d.slots_used > 0 || d.exclusive_taken || !d.allocated.IsZero()) {
        done(Status::FailedPrecondition(
            "device '" + device + "' on node '" + node +
            "' holds running work; its slots change only while it is idle (drain it first)"));
        return;
      }
    }
  }
  const DeviceSlotsRecord row{node, device, slots, by, s_->clock->NowMicros()};
  // Out of placement until the row is stored, so nothing lands on the device under the old count.
  (void)pool->engine->SetDeviceHealthy(node, device, false);
  std::vector<Mutation> batch{
      ::gpupool::SetDeviceSlots{row},  // the store's mutation, not this method
      AppendEvent{
          s_->Event("device.slots", "node/" + node + "/" + device, SlotsMessage(slots, by))}};
  s_->Persist(std::move(batch), [this, row, done = std::move(done)](Status st) {
    auto at = s_->nodes.find(row.node);
    PoolEntry* home = at == s_->nodes.end() ? nullptr : s_->FindPool(at->second.rec.pool);
    if (st.ok()) {
      s_->slots.Put(row);
      LogInfo("core", "device slots set",
              {{"node", row.node},
               {"device", row.device},
               {"slots", std::to_string(row.slots)},
               {"by", row.set_by}});
    }
    if (home != nullptr) {
      // Rebuilt from the book (the stored count, or the old one when the write failed).
      Status rebuilt = s_->ForgetNodeRoom(*home, row.node);
      if (rebuilt.ok())
        rebuilt = home->engine->AddNode(ToNodeSpecForAgents(at->second.rec, s_->slots));
      if (rebuilt.ok()) {
        s_->RecommitTasks(this, *home, row.node);
        rebuilt = home->engine->SetSchedulable(row.node, at->second.rec.state == NodeState::kReady);
      }
      if (!rebuilt.ok())
        LogError("core", "node not rebuilt after a slots change",
                 {{"node", row.node}, {"error", rebuilt.message()}});
      s_->ApplyDeviceHealth(*home, at->second);
      s_->RecomputeLimits(*home);
    }
    if (!st.ok()) {
      done(st.WithContext("device slots not set"));
      return;
    }
    done(GetNode(row.node));
    s_->RequestSchedule(this);
  });
}

}  // namespace gpupool
