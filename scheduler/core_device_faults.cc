// Core: device faults. An agent that sees a fatal XID or an uncorrectable ECC error on a device
// fails that device's tasks itself (reported with device_fault, requeued where retries allow)
// and reports the fault on every Register and Heartbeat. Here the fault is stored first
// (SetDeviceFault, an event), then the device is taken out of placement; it stays out — across
// agent reconnects, agent restarts that forget the fault and gpupoold restarts — until an admin
// clears it. See docs/sandbox.md, "Health".
#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

void Core::OnDeviceFaults(const std::string& node, const std::vector<DeviceFaultReport>& faults) {
  std::vector<Mutation> batch;
  std::vector<DeviceFaultRecord> rows;
  const int64_t now = s_->clock->NowMicros();
  for (const DeviceFaultReport& f : faults) {
    if (f.fault_id <= 0) continue;
    std::optional<DeviceFaultRecord> row =
        s_->faults.Report(node, f.device, f.reason, f.fault_id, now);
    if (!row) continue;
    batch.emplace_back(SetDeviceFault{*row});
    batch.emplace_back(AppendEvent{s_->Event("device.fault", "node/" + node + "/" + f.device,
                                             row->reason + "; out of service until cleared")});
    rows.push_back(std::move(*row));
  }
  if (rows.empty()) return;
  // Placement stops at once (taking a device out needs no durability); the book follows the
  // store, so a fault whose row was refused is reported, and stored, again by the next heartbeat.
  for (const DeviceFaultRecord& r : rows) {
    auto n = s_->nodes.find(node);
    if (n == s_->nodes.end()) continue;
    if (PoolEntry* pool = s_->FindPool(n->second.rec.pool)) {
      (void)pool->engine->SetDeviceHealthy(node, r.device, false);
    }
  }
  s_->Persist(std::move(batch), [this, node, rows = std::move(rows)](Status st) {
    if (!st.ok()) {
      LogWarn("core", "device fault not stored; waiting for the agent to report it again",
              {{"node", node}, {"error", st.message()}});
      return;
    }
    for (const DeviceFaultRecord& r : rows) {
      s_->faults.Put(r);
      LogWarn("core", "device out of service: fatal fault",
              {{"node", node}, {"device", r.device}, {"reason", r.reason}});
    }
    ApplyDeviceFaults(node);
  });
}

void Core::ApplyDeviceFaults(const std::string& node) {
  auto n = s_->nodes.find(node);
  if (n == s_->nodes.end()) return;
  PoolEntry* pool = s_->FindPool(n->second.rec.pool);
  if (pool == nullptr) return;
  for (const DeviceRecord& d : n->second.rec.devices) {
    if (s_->faults.Active(node, d.id) != nullptr) {
      (void)pool->engine->SetDeviceHealthy(node, d.id, false);
    }
  }
}

void Core::ClearDeviceFault(const std::string& node, const std::string& device,
                            const std::string& by, Callback<NodeView> done) {
  if (s_->nodes.find(node) == s_->nodes.end()) {
    done(Status::NotFound("node '" + node + "' not found"));
    return;
  }
  Result<DeviceFaultRecord> row = s_->faults.Clear(node, device, by, s_->clock->NowMicros());
  if (!row.ok()) {
    done(row.status());
    return;
  }
  std::vector<Mutation> batch{
      SetDeviceFault{*row},
      AppendEvent{s_->Event("device.fault_cleared", "node/" + node + "/" + device,
                            "cleared by " + (by.empty() ? std::string("an admin") : by) +
                                " (was: " + row->reason + ")")}};
  s_->Persist(std::move(batch),
              [this, node, device, row = *row, done = std::move(done)](Status st) {
                if (!st.ok()) {
                  done(st.WithContext("device fault not cleared"));
                  return;
                }
                s_->faults.Put(row);
                auto n = s_->nodes.find(node);
                PoolEntry* pool = n == s_->nodes.end() ? nullptr : s_->FindPool(n->second.rec.pool);
                // Back to what the agent last said of the device (and a re-layout under way).
                if (pool != nullptr) s_->ApplyDeviceHealth(*pool, n->second);
                LogInfo("core", "device fault cleared",
                        {{"node", node}, {"device", device}, {"by", row.cleared_by}});
                done(GetNode(node));
                s_->RequestSchedule(this);
              });
}

}  // namespace gpupool
