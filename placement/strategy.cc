// The registry: every strategy's name and factory, in one place.
#include "placement/strategy.h"

#include <array>
#include <string>

#include "placement/plugin.h"

namespace gpupool::placement {
namespace {

struct Entry {
  Strategy strategy;
  std::string_view name;
};

constexpr std::array<Entry, 9> kRegistry{{
    {Strategy::kFirstFit, "first-fit"},
    {Strategy::kBestFit, "best-fit"},
    {Strategy::kSpread, "spread"},
    {Strategy::kDotProduct, "dot-product"},
    {Strategy::kGpuPacking, "gpu-packing"},
    {Strategy::kGpuClustering, "gpu-clustering"},
    {Strategy::kFgd, "fgd"},
    {Strategy::kFgdPack, "fgd-pack"},
    {Strategy::kRandom, "random"},
}};

constexpr std::array<Strategy, kRegistry.size()> kAll = [] {
  std::array<Strategy, kRegistry.size()> a{};
  for (size_t i = 0; i < kRegistry.size(); ++i) a[i] = kRegistry[i].strategy;
  return a;
}();

}  // namespace

std::span<const Strategy> AllStrategies() { return kAll; }

std::string_view StrategyName(Strategy s) {
  for (const Entry& e : kRegistry)
    if (e.strategy == s) return e.name;
  return "unknown";
}

Result<Strategy> ParseStrategy(std::string_view name) {
  std::string known;
  for (const Entry& e : kRegistry) {
    if (e.name == name) return e.strategy;
    known += known.empty() ? "" : ", ";
    known += e.name;
  }
  return Status::InvalidArgument("unknown placement strategy '" + std::string(name) +
                                 "' (known: " + known + ")");
}

std::unique_ptr<StrategyPlugin> MakePlugin(Strategy s, const PluginEnv& env) {
  switch (s) {
    case Strategy::kFirstFit:
      return MakeFirstFit();
    case Strategy::kBestFit:
      return MakeBestFit();
    case Strategy::kSpread:
      return MakeSpread();
    case Strategy::kDotProduct:
      return MakeDotProduct();
    case Strategy::kGpuPacking:
      return MakeGpuPacking();
    case Strategy::kGpuClustering:
      return MakeGpuClustering();
    case Strategy::kFgd:
      return MakeFgd(env);
    case Strategy::kFgdPack:
      return MakeFgdPack(env);
    case Strategy::kRandom:
      return MakeRandom(env);
  }
  return MakeFirstFit();
}

}  // namespace gpupool::placement
