#include "placement/share_patterns.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace gpupool::placement {
namespace {

constexpr int32_t kFull = kShareStates - 1;

// First-fit decreasing with a max-segment tree over the bins: the leftmost bin with room.
class FirstFit {
 public:
  explicit FirstFit(size_t bins) {
    while (leaves_ < bins) leaves_ *= 2;
    tree_.assign(2 * leaves_, kFull);
    contents_.resize(bins);
  }
  void Add(int32_t size) {
    size_t i = 1;
    while (i < leaves_) i = tree_[2 * i] >= size ? 2 * i : 2 * i + 1;
    const size_t bin = i - leaves_;
    used_ = std::max(used_, bin + 1);
    contents_[bin].push_back(size);
    tree_[i] -= size;
    for (i /= 2; i >= 1; i /= 2) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  // Each used bin's content, sorted (a pattern).
  std::vector<std::vector<int32_t>> Bins() const {
    std::vector<std::vector<int32_t>> out(contents_.begin(),
                                          contents_.begin() + static_cast<long>(used_));
    for (auto& b : out) std::sort(b.begin(), b.end());
    return out;
  }

 private:
  size_t leaves_ = 1;
  std::vector<int32_t> tree_;
  std::vector<std::vector<int32_t>> contents_;
  size_t used_ = 0;
};

}  // namespace

std::vector<double> ShareWaste(const std::vector<FragClass>& workload, int scale) {
  std::map<int32_t, double> weight;  // share size → probability
  double total = 0;
  for (const FragClass& c : workload) {
    if (c.gpu_count != 1 || c.gpu_milli <= 0 || c.gpu_milli >= kFull) continue;
    weight[c.gpu_milli] += c.p;
    total += c.p;
  }
  if (total <= 0) return {};
  std::vector<int32_t> items;
  for (auto it = weight.rbegin(); it != weight.rend(); ++it) {
    const auto n = std::max<long>(1, std::lround(it->second / total * scale));
    items.insert(items.end(), static_cast<size_t>(n), it->first);  // largest first
  }
  FirstFit ff(items.size());
  for (int32_t s : items) ff.Add(s);
  std::map<std::vector<int32_t>, double> patterns;
  for (const std::vector<int32_t>& b : ff.Bins()) patterns[b] += 1;
  // Every sub-multiset of every pattern: weight and waste per free share it leaves.
  std::vector<double> sum(kShareStates, 0), count(kShareStates, 0);
  for (const auto& [p, m] : patterns) {
    int32_t filled = 0;
    std::vector<std::pair<int32_t, int>> groups;  // (size, how many in the pattern)
    for (int32_t s : p) {
      filled += s;
      if (groups.empty() || groups.back().first != s) groups.emplace_back(s, 0);
      ++groups.back().second;
    }
    const double waste = kFull - filled;
    std::vector<int> take(groups.size(), 0);  // an odometer over the counts taken
    while (true) {
      size_t k = 0;
      while (k < groups.size() && take[k] == groups[k].second) take[k++] = 0;
      if (k == groups.size()) break;
      ++take[k];
      int32_t in = 0;
      for (size_t g = 0; g < groups.size(); ++g) in += take[g] * groups[g].first;
      sum[static_cast<size_t>(kFull - in)] += m * waste;
      count[static_cast<size_t>(kFull - in)] += m;
    }
  }
  std::vector<double> out(kShareStates);
  for (int32_t r = 0; r < kShareStates; ++r) {
    const size_t i = static_cast<size_t>(r);
    out[i] = count[i] > 0 ? sum[i] / count[i] : r;
  }
  out[static_cast<size_t>(kFull)] = 0;  // a fresh device
  return out;
}

}  // namespace gpupool::placement
