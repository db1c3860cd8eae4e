#include "placement/strategies/random.h"

#include "placement/fit.h"

namespace gpupool::placement {
namespace {

// splitmix64: a tiny, well-mixed generator; state lives in the plugin, seeded by the pool.
uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A fresh random score per evaluation: the best of n uniform draws is a uniform pick among the
// n feasible nodes. Not cacheable, so the engine scores every feasible node per request.
class Random final : public StrategyPlugin {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  bool Score(const NodeState& node, const CompiledRequest& req, const DeviceSet& candidates,
             Scored* out) const override {
    if (req.kind == RequestKind::kFractional && req.gpu_count == 1 && candidates.n > 0) {
      // A random device too: best fit inside the node would already be a packing policy.
      out->devices.n = 0;
      out->devices.Push(candidates.idx[Next(state_) % static_cast<uint64_t>(candidates.n)]);
      if (!SpillFits(node, req, out->devices)) return false;
    } else if (!ChooseDevices(node, req, candidates, &out->devices)) {
      return false;
    }
    out->score = static_cast<int64_t>(Next(state_) >> 2);
    return true;
  }
  bool Cacheable() const override { return false; }

 private:
  mutable uint64_t state_;
};

}  // namespace

std::unique_ptr<StrategyPlugin> MakeRandom(const PluginEnv& env) {
  return std::make_unique<Random>(env.seed);
}

}  // namespace gpupool::placement
