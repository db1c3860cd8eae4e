// FreePort (tests/support/free_port.h): CI refused a stop when the kernel offered one released
// port twice and a test daemon got it for both gRPC and HTTP. However many ports a test asks for,
// none comes back twice.
#include "tests/support/free_port.h"

#include <gtest/gtest.h>

#include <set>

namespace gpupool::testing {
namespace {

TEST(FreePortTest, NeverTheSamePortTwiceInAProcess) {
  std::set<int> seen;
  for (int i = 0; i < 500; ++i) {
    const int port = FreePort();
    ASSERT_GT(port, 0);
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice";
  }
}

}  // namespace
}  // namespace gpupool::testing
