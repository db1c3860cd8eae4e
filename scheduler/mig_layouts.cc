#include "scheduler/mig_layouts.h"

#include <algorithm>

namespace gpupool {

MigLayout ReportedMigLayout(const NodeRecord& node, const std::string& gpu) {
  MigLayout out;
  for (const DeviceRecord& d : node.devices) {
    if (d.parent_id == gpu && !d.mig_profile.empty()) out.push_back({d.mig_profile, d.mig_start});
  }
  return out;
}

void MigLayoutBook::Load(const std::vector<MigLayoutRecord>& rows) {
  rows_.clear();
  for (const MigLayoutRecord& r : rows) Put(r);
}

void MigLayoutBook::Put(const MigLayoutRecord& row) { rows_[{row.node, row.gpu}] = row; }

const MigLayoutRecord* MigLayoutBook::Find(const std::string& node, const std::string& gpu) const {
  auto it = rows_.find({node, gpu});
  return it == rows_.end() ? nullptr : &it->second;
}

std::vector<MigLayoutRecord> MigLayoutBook::OfNode(const std::string& node) const {
  std::vector<MigLayoutRecord> out;
  for (auto it = rows_.lower_bound({node, ""}); it != rows_.end() && it->first.first == node; ++it)
    out.push_back(it->second);
  return out;
}

bool MigLayoutBook::HoldsOut(const std::string& node, const std::string& gpu) const {
  const MigLayoutRecord* r = Find(node, gpu);
  return r != nullptr &&
         (r->state == MigLayoutState::kApplying || r->state == MigLayoutState::kDraining);
}

MigLayoutRecord MigLayoutBook::Next(const std::string& node, const std::string& gpu,
                                    const MigLayout& layout, MigLayoutState state,
                                    std::string reason, std::string set_by, int64_t now_us) const {
  const MigLayoutRecord* before = Find(node, gpu);
  MigLayoutRecord r;
  r.node = node;
  r.gpu = gpu;
  r.layout = FormatMigLayout(layout);
  r.generation = before == nullptr ? 1 : before->generation + 1;
  r.state = state;
  r.reason = std::move(reason);
  r.set_by = std::move(set_by);
  r.updated_us = now_us;
  return r;
}

MigLayoutBook::Settlement MigLayoutBook::Settle(
    const NodeRecord& node, const std::vector<AgentRegistration::MigOutcome>& outcomes,
    const std::function<bool(const std::string& gpu)>& busy, int64_t now_us) const {
  Settlement out;
  for (const MigLayoutRecord& row : OfNode(node.name)) {
    const bool reported = std::any_of(node.devices.begin(), node.devices.end(),
                                      [&](const DeviceRecord& d) { return d.id == row.gpu; });
    if (!reported) continue;  // the GPU is gone; its row waits for it
    const bool has_layout = FormatMigLayout(ReportedMigLayout(node, row.gpu)) == row.layout;
    const AgentRegistration::MigOutcome* outcome = nullptr;
    for (const auto& o : outcomes) {
      if (o.gpu == row.gpu && o.generation == row.generation) outcome = &o;
    }
    MigLayoutRecord next = row;
    next.updated_us = now_us;
    switch (row.state) {
      case MigLayoutState::kApplying:
        if (outcome != nullptr && !outcome->error.empty()) {
          next.state = MigLayoutState::kFailed;
          next.reason =
              outcome->faulted
                  ? "re-layout failed and the previous layout was lost (GPU out of "
                    "service until an admin clears its fault): " +
                        outcome->error
                  : "re-layout refused (the GPU kept its previous layout): " + outcome->error;
          out.store.push_back(next);
          if (outcome->faulted) out.faulted.push_back(next);
        } else if (has_layout) {
          next.state = MigLayoutState::kApplied;
          out.store.push_back(next);
        } else {
          out.ask.push_back(row);  // the agent never saw it, or restarted mid-way
        }
        break;
      case MigLayoutState::kApplied:
        if (!has_layout && !busy(row.gpu)) {
          // The node came back without it (a reboot loses MIG instances): asked again.
          next.generation = row.generation + 1;
          next.state = MigLayoutState::kApplying;
          next.reason = "the node reported another layout; re-applying " +
                        (row.layout.empty() ? std::string("(none)") : row.layout);
          out.store.push_back(next);
          out.ask.push_back(next);
        }
        break;
      case MigLayoutState::kDraining:
      case MigLayoutState::kFailed:
        break;
    }
  }
  return out;
}

}  // namespace gpupool
