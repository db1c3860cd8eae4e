#include "placement/score_index.h"

namespace gpupool::placement {

void ScoreIndex::Resize(int slots) {
  const int old = static_cast<int>(score_.size());
  if (slots <= old) return;
  score_.resize(static_cast<size_t>(slots), kNoScore);
  tie_.resize(static_cast<size_t>(slots), 0);
  dirty_.resize(static_cast<size_t>(slots), 0);
  if (slots > leaves_) {
    int l = 1;
    while (l < slots) l *= 2;
    leaves_ = l;
    tree_.assign(static_cast<size_t>(2 * l), -1);
    // Re-seat the leaves we already know; the rebuild of inner nodes follows in SetLeaf.
    for (int s = 0; s < old; ++s)
      if (score_[static_cast<size_t>(s)] != kNoScore) SetLeaf(s, s);
  }
  for (int s = old; s < slots; ++s) MarkDirty(s);
}

void ScoreIndex::MarkDirty(int slot) {
  if (static_cast<size_t>(slot) >= dirty_.size() || dirty_[static_cast<size_t>(slot)]) return;
  dirty_[static_cast<size_t>(slot)] = 1;
  dirty_list_.push_back(slot);
}

bool ScoreIndex::Better(int a, int b) const {
  if (a < 0) return false;
  if (b < 0) return true;
  const int64_t sa = score_[static_cast<size_t>(a)], sb = score_[static_cast<size_t>(b)];
  if (sa != sb) return sa > sb;
  const uint64_t ta = tie_[static_cast<size_t>(a)], tb = tie_[static_cast<size_t>(b)];
  if (ta != tb) return ta < tb;
  return a < b;
}

void ScoreIndex::Rebuild() {
  for (size_t i = static_cast<size_t>(leaves_) - 1; i >= 1; --i) {
    const int l = tree_[2 * i], r = tree_[2 * i + 1];
    tree_[i] = Better(r, l) ? r : l;
  }
}

void ScoreIndex::SetLeaf(int slot, int value) {
  size_t i = static_cast<size_t>(leaves_ + slot);
  tree_[i] = value;
  for (i /= 2; i >= 1; i /= 2) {
    const int l = tree_[2 * i], r = tree_[2 * i + 1];
    const int best = Better(r, l) ? r : l;
    // Another slot still wins here: nothing above can change.
    if (best == tree_[i] && best != slot) return;
    tree_[i] = best;
  }
}

}  // namespace gpupool::placement
