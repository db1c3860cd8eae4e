// ReservationBook: the room preemption frees, kept for the preemptor (docs/tenancy.md).
//
// A reservation names the preemptor's task (job, index, attempt), the placement it will take
// once its victims are gone, the victims (task ids) still holding their allocation, and the
// victims' allocations already released by their tasks but kept committed in the engine for it
// (`held`), so no other task can take the room in between.
//
// Invariants (the book's own; what the engine holds is the core's business, core_reservations.cc):
//  * ids are unique and increase; an id is never reused;
//  * the reservations of one gang preemption share `job_id` and have `gang` set: they stand and
//    fall together (GroupOf);
//  * a reservation whose `victims` is empty is ready to be taken up by the next pass.
// Single-threaded (the core's thread). No I/O.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "placement/placement.h"
#include "scheduler/model.h"

namespace gpupool {

struct Reservation {
  std::string pool;
  int64_t job_id = 0;
  int32_t index = 0;
  int32_t attempt = 0;
  placement::Allocation allocation;  // the preemptor's placement once the victims are gone
  std::set<std::string> victims;     // task ids still holding their allocation
  std::vector<placement::Allocation> held;
  int64_t created_us = 0;
  bool gang = false;  // one of a gang's reservations: all of them are taken up together
  // The quota the reservation holds for its task (TenantBook::Hold) until it is taken up or
  // dropped: the usage of `allocation`, charged to `tenant`'s chain.
  std::string tenant;
  QuotaAmount quota;
};

class ReservationBook {
 public:
  // Files `r` under a new id and returns it.
  int64_t Add(Reservation r);
  Reservation* Find(int64_t id);
  const Reservation* Find(int64_t id) const;
  void Erase(int64_t id) { by_id_.erase(id); }
  bool empty() const { return by_id_.empty(); }
  size_t size() const { return by_id_.size(); }

  // Every id, in creation order (a copy: callers may erase as they go).
  std::vector<int64_t> Ids() const;
  // The reservations whose placement is on `node` of `pool` ("" pool: any).
  std::vector<const Reservation*> OnNode(const std::string& pool, const std::string& node) const;
  std::vector<int64_t> IdsOnNode(const std::string& node) const;
  std::vector<int64_t> IdsInPool(const std::string& pool) const;
  // The ids that stand and fall with `id`: its gang's reservations, or `id` alone.
  std::vector<int64_t> GroupOf(int64_t id) const;
  // True when every reservation of `id`'s group has no victim left.
  bool GroupReady(int64_t id) const;

 private:
  std::map<int64_t, Reservation> by_id_;
  int64_t next_id_ = 1;
};

}  // namespace gpupool
