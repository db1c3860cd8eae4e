// The strategy registry: every name parses back to its strategy; unknown names list the known.
#include <gtest/gtest.h>

#include "placement/strategy.h"

namespace gpupool::placement {
namespace {

TEST(RegistryTest, NamesRoundTrip) {
  EXPECT_EQ(AllStrategies().size(), 9u);
  for (Strategy s : AllStrategies()) {
    auto parsed = ParseStrategy(StrategyName(s));
    ASSERT_TRUE(parsed.ok()) << StrategyName(s);
    EXPECT_EQ(*parsed, s);
  }
}

TEST(RegistryTest, UnknownNameListsKnownOnes) {
  auto r = ParseStrategy("tetris");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fgd-pack"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::placement
