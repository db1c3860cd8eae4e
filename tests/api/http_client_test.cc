// gpupoold's HTTP client (api/http_client.h): the Host header names the port a server was reached
// on (a server that builds its own URLs from it — an OpenID provider's discovery document, a
// webhook receiver behind a virtual host — would otherwise point at the default port).
#include "api/http_client.h"

#include <gtest/gtest.h>

namespace gpupool::api {
namespace {

TEST(HttpClientTest, TheHostHeaderKeepsAPortThatIsNotTheDefault) {
  EXPECT_EQ(HostHeader({true, "hooks.example", 443, "/"}), "hooks.example");
  EXPECT_EQ(HostHeader({true, "hooks.example", 8443, "/"}), "hooks.example:8443");
  EXPECT_EQ(HostHeader({false, "127.0.0.1", 80, "/"}), "127.0.0.1");
  EXPECT_EQ(HostHeader({false, "127.0.0.1", 52101, "/"}), "127.0.0.1:52101");
  EXPECT_EQ(HostHeader({true, "::1", 443, "/"}), "[::1]");
  EXPECT_EQ(HostHeader({true, "::1", 9443, "/"}), "[::1]:9443");
}

TEST(HttpClientTest, ErrorsKeepOnlyPrintableText) {
  EXPECT_EQ(PrintableAscii("ok\n\x01"), "ok??");
  EXPECT_EQ(PrintableAscii(std::string(400, 'x')).size(), 300u);
}

}  // namespace
}  // namespace gpupool::api
