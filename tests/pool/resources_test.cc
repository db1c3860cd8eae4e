#include "pool/resources.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(ResourcesTest, FitsAndArithmetic) {
  Resources free{989'000, 81'920};
  EXPECT_TRUE(free.Fits({500'000, 40'960}));
  EXPECT_FALSE(free.Fits({500'000, 81'921}));
  Resources left = free - Resources{500'000, 40'960};
  EXPECT_EQ(left, (Resources{489'000, 40'960}));
}

TEST(ResourcesTest, OfferedUnderOvercommit) {
  // 1.5× compute, 1.25× memory on an H100: 989 TFLOPS × 1.5 = 1483.5; 81920 MiB × 1.25 = 102400.
  Resources physical{989'000, 81'920};
  Resources offered = Offered(physical, Ratio::FromDouble(1.5), Ratio::FromDouble(1.25));
  EXPECT_EQ(offered, (Resources{1'483'500, 102'400}));
}

TEST(ResourcesTest, Formatting) {
  EXPECT_EQ(FormatTflops(12'500), "12.5");
  EXPECT_EQ(FormatTflops(989'000), "989");
  EXPECT_EQ((Resources{1'234, 10}).ToString(), "1.234 TFLOPS, 10 MiB");
}

}  // namespace
}  // namespace gpupool
