// StarvationBook: nodes drained for big work that has waited too long (docs/tenancy.md,
// "Starvation reservations").
//
// A pending task — or a whole gang — that has found no room for
// `tenancy.starvation_reserve_after_ms` gets nodes reserved for it: the core places nothing new
// of its own class or lower there (higher classes only when nothing else fits), so the nodes
// drain as their tasks end and the waiting work fits. The book holds who reserved which nodes,
// since when the candidates have waited, and which tasks must let others have a turn after
// their reservation timed out. What the engine holds is the core's business
// (core_starvation.cc); the book is plain data.
//
// Invariants (kept by Add/Erase, the only writers of reservations):
//  * one reservation per key (a gang's key is its job with index -1: it reserves as one);
//  * a node is reserved by at most one reservation (`holder_of` is the reverse map);
//  * ids are unique and increase.
// A task counts as starving only once smaller work has been placed in its pool since it began
// to wait (Overtaken): a task passed over by tasks its own size or bigger is queued, and fair
// share and priority decide its turn, not this book.
// Single-threaded (the core's thread). No I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpupool {

// A task (job, index) or a gang (job, -1).
using StarvingKey = std::pair<int64_t, int32_t>;

struct StarvationReservation {
  int64_t id = 0;
  std::string pool;
  StarvingKey key;
  int32_t attempt = 0;   // of the task it reserves for (gangs: of their first pending member)
  int32_t priority = 0;  // its priority class value: tasks of higher classes may still use its
                         // nodes when nothing else fits
  std::vector<std::string> nodes;  // sorted
  int64_t created_us = 0;
  int64_t waiting_since_us = 0;
};

class StarvationBook {
 public:
  // Files `r` under a new id (returned). REQUIRES: no reservation for r.key, and none of
  // r.nodes reserved.
  int64_t Add(StarvationReservation r);
  void Erase(const StarvingKey& key);
  const StarvationReservation* Find(const StarvingKey& key) const;
  // The reservation holding `node`, or nullptr.
  const StarvationReservation* HolderOf(const std::string& node) const;
  bool empty() const { return by_key_.empty(); }
  size_t size() const { return by_key_.size(); }
  // Reservations and reserved nodes in `pool`.
  int32_t CountIn(const std::string& pool) const;
  int32_t NodesIn(const std::string& pool) const;
  // Every reservation, in key order (a copy: callers may erase as they go).
  std::vector<StarvationReservation> All() const;
  const std::map<StarvingKey, StarvationReservation>& by_key() const { return by_key_; }
  // The pools that ever had a reservation (their gauges are published, zero included).
  const std::map<std::string, bool>& pools_seen() const { return pools_seen_; }

  // Records a placement of work of `size` (milli-GPU, SizeMilli in core_starvation.cc) in
  // `pool` at `now_us`.
  void Placed(const std::string& pool, int64_t size, int64_t now_us) {
    placed_[pool][size] = now_us;
  }
  // True when work smaller than `size` was placed in `pool` at or after `since_us`: a task of
  // `size` waiting since then is being passed over for its size, not merely queued.
  bool Overtaken(const std::string& pool, int64_t size, int64_t since_us) const;

  // When the candidate began to wait (memory only; see WaitingSince in core_starvation.cc).
  std::map<std::pair<StarvingKey, int32_t>, int64_t> first_seen;  // (key, attempt) → µs
  // The nodes of a key's reservations that timed out: its next ones are made elsewhere while
  // other nodes can host it.
  std::map<StarvingKey, std::set<std::string>> tried;
  // Whether Placed was fed the stored placements of the running tasks (after a start).
  bool seeded = false;
  // A key whose reservation timed out reserves again no sooner than this.
  std::map<StarvingKey, int64_t> cooldown_until;

 private:
  std::map<StarvingKey, StarvationReservation> by_key_;
  std::map<std::string, StarvingKey> holder_of_;
  std::map<std::string, bool> pools_seen_;
  std::map<std::string, std::map<int64_t, int64_t>> placed_;  // pool → size → last placed µs
  int64_t next_id_ = 1;
};

}  // namespace gpupool
