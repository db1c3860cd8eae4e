// Tentative: a transaction over an Engine's allocations. A scheduling pass tries things — commit
// a placement to see whether reserved room still fits, release victims' allocations to look for
// a preemption — and must leave the engine exactly as it found it unless it keeps the result.
//
// Each Commit/Release goes to the engine at once (so Place and FindVictims see it) and is logged.
// Rollback undoes the logged steps in reverse order (a release is committed again, a commit is
// released); Keep makes them permanent. The destructor rolls back whatever was not kept, so an
// early return cannot leave a tentative step behind.
//
// Invariant: after Rollback (or destruction without Keep) every counter of the engine is what it
// was when the transaction began, given that nothing else changed the engine in between
// (Engine: "Release(a) after Commit(a) restores every counter exactly"). Transactions nest: an
// inner one must end (kept or rolled back) before the outer one does.
//
// Pure: no I/O. Not thread-safe (the engine is not).
#pragma once

#include <cstddef>
#include <vector>

#include "placement/placement.h"

namespace gpupool::placement {

class Tentative {
 public:
  explicit Tentative(Engine& engine) : engine_(engine) {}
  ~Tentative() { (void)Rollback(); }
  Tentative(const Tentative&) = delete;
  Tentative& operator=(const Tentative&) = delete;

  // The engine's Commit/Release, logged when they succeed (a failed step changed nothing).
  Status Commit(const Allocation& allocation);
  Status Release(const Allocation& allocation);

  // Keeps every step so far: they are no longer undone.
  void Keep() { log_.clear(); }
  // Undoes every step not kept, newest first. An undo that fails means something else changed
  // the engine meanwhile (a broken REQUIRES); the first such error is returned, the rest still
  // undone.
  Status Rollback();
  size_t steps() const { return log_.size(); }

 private:
  struct Step {
    bool committed;  // undo: release (true) or commit again (false)
    Allocation allocation;
  };
  Engine& engine_;
  std::vector<Step> log_;
};

}  // namespace gpupool::placement
