// ScoreIndex: the cached scores of one request shape over every node, kept in a segment tree so
// the best node is found in O(log n) and a node's change costs O(log n) — not a scan of all nodes.
//
// The engine keeps one index per request shape it has seen. A node that changes is marked dirty
// in every index; an index recomputes only its dirty leaves, and only when its shape is asked
// for again (lazy). Leaves hold (score, tie key); the root holds the best: highest score, then
// smallest tie key, then lowest slot.
//
// Thread safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpupool::placement {

class ScoreIndex {
 public:
  static constexpr int64_t kNoScore = INT64_MIN;

  // Grows to `slots` leaves; new leaves are dirty.
  void Resize(int slots);
  void MarkDirty(int slot);
  bool HasDirty() const { return !dirty_list_.empty(); }

  // After a workload change every cached score is stale, though still a fair guess (feasibility
  // never is: a node whose state changed is dirty). Each Sync then also recomputes up to
  // `stale_budget` stale leaves, round robin, so a change in a large pool costs a bounded rescan
  // per decision instead of one full rescan; with a budget of at least the slots, the first Sync
  // recomputes every leaf, exactly as a new index would.
  void MarkAllStale() { stale_left_ = score_.size(); }
  bool HasStale() const { return stale_left_ > 0; }

  // Recomputes every dirty leaf and up to `stale_budget` stale ones: fn(slot, int64_t* score,
  // uint64_t* tie) → feasible.
  template <typename Fn>
  void Sync(Fn&& fn, size_t stale_budget = static_cast<size_t>(-1)) {
    for (size_t k = stale_left_ < stale_budget ? stale_left_ : stale_budget; k > 0; --k) {
      if (stale_next_ >= score_.size()) stale_next_ = 0;
      MarkDirty(static_cast<int>(stale_next_++));
      --stale_left_;
    }
    // Many dirty leaves (a new index): set them all, then rebuild the tree once — O(n), not
    // O(n log n).
    const bool bulk = dirty_list_.size() * 8 > score_.size();
    for (int slot : dirty_list_) {
      dirty_[static_cast<size_t>(slot)] = 0;
      int64_t s = kNoScore;
      uint64_t t = 0;
      if (!fn(slot, &s, &t)) s = kNoScore;
      // A touched node often scores as before for this shape: then the tree is still right.
      if (!bulk && s == score_[static_cast<size_t>(slot)] && t == tie_[static_cast<size_t>(slot)])
        continue;
      score_[static_cast<size_t>(slot)] = s;
      tie_[static_cast<size_t>(slot)] = t;
      if (bulk) {
        tree_[static_cast<size_t>(leaves_ + slot)] = s == kNoScore ? -1 : slot;
      } else {
        SetLeaf(slot, s == kNoScore ? -1 : slot);
      }
    }
    dirty_list_.clear();
    if (bulk) Rebuild();
  }

  // The best slot for which accept(slot) holds, or -1. Slots that fail are masked while the
  // search goes on and restored before returning.
  template <typename Pred>
  int Best(Pred&& accept) {
    int found = -1;
    masked_.clear();
    while (tree_.size() > 1 && tree_[1] >= 0) {
      const int slot = tree_[1];
      if (accept(slot)) {
        found = slot;
        break;
      }
      masked_.push_back(slot);
      SetLeaf(slot, -1);
    }
    for (int slot : masked_) SetLeaf(slot, slot);
    return found;
  }

  int64_t ScoreOf(int slot) const { return score_[static_cast<size_t>(slot)]; }

  // How far this index has read the engine's log of touched nodes.
  size_t log_cursor = 0;

 private:
  bool Better(int a, int b) const;
  void Rebuild();
  void SetLeaf(int slot, int value);

  int leaves_ = 0;         // power of two ≥ slots
  std::vector<int> tree_;  // 1-based heap layout; each entry the best slot below, or -1
  std::vector<int64_t> score_;
  std::vector<uint64_t> tie_;
  std::vector<uint8_t> dirty_;  // a byte per slot: faster than vector<bool> here
  std::vector<int> dirty_list_;
  std::vector<int> masked_;
  size_t stale_left_ = 0;  // stale leaves not yet recomputed (MarkAllStale)
  size_t stale_next_ = 0;  // the next one, round robin
};

}  // namespace gpupool::placement
