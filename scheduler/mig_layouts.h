// MigLayoutBook: the MIG layouts the scheduler asked of GPUs (issue 27; docs/placement.md,
// "Dynamic MIG"), and the rules that settle them against what agents report. The core stores a
// PutMigLayout row first and only then calls Put(); everything else here is a `const` plan the
// core stores and applies.
//
// A row's life: kApplying (stored, then the agent is asked; the GPU's instances take no new
// work) → kApplied when a registration shows exactly that layout, or kFailed when the agent says
// why not (its outcome for the row's generation). An agent that restarted mid-way says nothing:
// it is asked again. A kApplied row whose GPU comes back with another layout (a reboot loses MIG
// instances) is re-applied while the GPU is idle. kDraining rows (the pool's drain policy) hold
// a busy GPU's instances out of placement until they are idle, then become kApplying.
//
// Thread safety: none; the core's thread owns it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pool/mig_layout.h"
#include "scheduler/model.h"
#include "scheduler/views.h"

namespace gpupool {

// The layout a node reports for GPU `gpu`: its instances (devices whose parent is `gpu`) as
// (profile, start), in the node's device order (FormatMigLayout gives the canonical text).
MigLayout ReportedMigLayout(const NodeRecord& node, const std::string& gpu);

class MigLayoutBook {
 public:
  // Replaces the book's rows (Recover()).
  void Load(const std::vector<MigLayoutRecord>& rows);
  // Applies a stored row.
  void Put(const MigLayoutRecord& row);
  const MigLayoutRecord* Find(const std::string& node, const std::string& gpu) const;
  std::vector<MigLayoutRecord> OfNode(const std::string& node) const;
  // Whether `gpu`'s instances are held out of placement: a re-layout is under way or waits for
  // the GPU to drain.
  bool HoldsOut(const std::string& node, const std::string& gpu) const;

  // What a registration of `node` settles: rows to store with their new state, and the rows
  // (already in `store`, or unchanged) whose layout the agent must be asked for (again).
  // `busy(gpu)`: whether a task the core placed holds one of the GPU's instances.
  struct Settlement {
    std::vector<MigLayoutRecord> store;
    std::vector<MigLayoutRecord> ask;
    // Rows that became kFailed with the GPU's previous layout lost too (out of service).
    std::vector<MigLayoutRecord> faulted;
  };
  Settlement Settle(const NodeRecord& node,
                    const std::vector<AgentRegistration::MigOutcome>& outcomes,
                    const std::function<bool(const std::string& gpu)>& busy, int64_t now_us) const;

  // The next row of `gpu` on `node` asking for `layout`: the generation after the stored one.
  MigLayoutRecord Next(const std::string& node, const std::string& gpu, const MigLayout& layout,
                       MigLayoutState state, std::string reason, std::string set_by,
                       int64_t now_us) const;

 private:
  std::map<std::pair<std::string, std::string>, MigLayoutRecord> rows_;
};

}  // namespace gpupool
