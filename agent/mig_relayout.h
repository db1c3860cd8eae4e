// MigRelayouter: the node's half of dynamic MIG (issue 27; docs/agent.md, "Dynamic MIG"). The
// scheduler asks for one GPU's layout (SetMigLayout); this checks it, re-partitions the GPU
// through the backend all or nothing, and keeps the outcome for the next Register.
//
// Never half-configured. A re-partition is several driver calls; the agent may die between two.
// So before the first call a journal entry is made durable (<data_dir>/mig/<gpu>: the layout
// asked for and the one the GPU had), and removed only once the GPU is whole again. An agent
// that starts and finds an entry finishes the job before it registers: the layout asked for,
// else the one the GPU had, else no instance at all with the GPU reported faulted. A GPU whose
// instances run a task is never touched: the request is refused, and a journal entry found then
// waits (its GPU is reported faulted until it can be finished).
//
// Thread safety: one thread (the agent's strand).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "base/status.h"
#include "gpupool/v1/agent.pb.h"
#include "pool/catalog.h"

namespace gpupool::agent {

class MigRelayouter {
 public:
  // Whether a running task holds GPU `gpu` or one of its instances.
  using BusyFn = std::function<bool(const std::string& gpu)>;

  // REQUIRES: `backend` outlives this. `dir` holds the journal (created when needed).
  MigRelayouter(DeviceBackend* backend, Catalog models, std::string dir);

  // Finishes what a previous agent left in the journal (see above). Call before registering.
  void Recover(const Inventory& inventory, const BusyFn& busy);

  // Applies one request against the node's current `inventory`; the outcome is kept (and
  // returned). A request for a generation already applied is applied again (harmless: the
  // backend destroys and re-creates the same layout).
  v1::MigLayoutOutcome Apply(const v1::SetMigLayout& req, const Inventory& inventory,
                             const BusyFn& busy);

  // The outcomes since the agent started, one per GPU (its latest). A GPU left without
  // instances because neither layout could be made is reported faulted: out of service.
  void FillRegister(v1::Register* r) const;

 private:
  struct Entry {
    std::string gpu;
    std::string wanted;
    std::string previous;
    int64_t generation = 0;
  };
  Status WriteEntry(const Entry& e) const;
  void RemoveEntry(const std::string& gpu) const;
  // Makes GPU `e.gpu` whole: `e.wanted`, else `e.previous`, else no instance (faulted).
  v1::MigLayoutOutcome Finish(const Entry& e, const GpuModel& model);

  DeviceBackend* const backend_;
  const Catalog models_;
  const std::string dir_;
  std::map<std::string, v1::MigLayoutOutcome> outcomes_;
};

}  // namespace gpupool::agent
