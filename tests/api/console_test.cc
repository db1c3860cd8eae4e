// The web console's static files over a real HttpServer on loopback (the page itself is driven in
// a real browser by tests/e2e/console_e2e_test.cc): each embedded file answers without a
// credential, with its exact type and the security headers, while the API beside it still
// demands one; and the files keep to what the Content-Security-Policy and the XSS rule need —
// no inline script, style or event handler, no HTML parsing of data, no persistent token.
#include "api/rest/console.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <regex>

#include "api/auth.h"
#include "api/rest/console_files.h"
#include "api/rest/http_server.h"
#include "tests/api/fake_api_service.h"
#include "tests/api/http_client.h"

namespace gpupool::api::rest {
namespace {

using testing::HttpCall;
using testing::HttpResult;
using testing::http::verb;

class ConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto auth = Authenticator::Create({{"console-test-token-0123456789", "acme", false}});
    ASSERT_TRUE(auth.ok());
    auth_ = std::move(auth).value();
    server_ =
        std::make_unique<HttpServer>(fake_, auth_, registry_, "127.0.0.1:0", HttpServerOptions{});
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Shutdown(); }
  HttpResult Get(const std::string& target) { return HttpCall(server_->port(), verb::get, target); }

  testing::FakeApiService fake_;
  Authenticator auth_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<HttpServer> server_;
};

void ExpectSecurityHeaders(const HttpResult& r, const std::string& what) {
  EXPECT_EQ(r.headers["X-Content-Type-Options"], "nosniff") << what;
  EXPECT_EQ(r.headers["Cache-Control"], "no-cache") << what;
  EXPECT_EQ(r.headers["Referrer-Policy"], "no-referrer") << what;
  const std::string csp(r.headers["Content-Security-Policy"]);
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << what;
  EXPECT_NE(csp.find("script-src 'self';"), std::string::npos) << what;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << what;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << what;
}

TEST_F(ConsoleTest, ServesEveryEmbeddedFileWithoutCredentialAndWithItsHeaders) {
  ASSERT_GE(console::Files().size(), 3u);
  for (const console::EmbeddedFile& f : console::Files()) {
    const std::string path = "/console/" + std::string(f.name);
    const HttpResult r = Get(path);
    ASSERT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, f.data) << path;
    EXPECT_EQ(r.headers["Content-Type"], ConsoleContentType(f.name)) << path;
    ExpectSecurityHeaders(r, path);
  }
  const HttpResult index = Get("/console/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.headers["Content-Type"], "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("<title>gpupool console</title>"), std::string::npos);
  for (const std::string path : {"/", "/console"}) {
    const HttpResult r = Get(path);
    EXPECT_EQ(r.status, 302) << path;
    EXPECT_EQ(r.headers["Location"], "/console/") << path;
  }
  EXPECT_EQ(Get("/console/missing.js").status, 404);
  EXPECT_EQ(Get("/v1/jobs").status, 401);  // the data still needs a credential
}

TEST(ConsoleFilesTest, TypesAreExact) {
  EXPECT_EQ(ConsoleContentType("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("x.bin"), "application/octet-stream");
}

TEST(ConsoleFilesTest, KeepToThePolicyAndTheTextOnlyRule) {
  const std::regex inline_script(R"(<script(?![^>]*\ssrc=)[^>]*>)", std::regex::icase);
  const std::regex handler_attr(R"(<[^>]*\son[a-z]+\s*=)", std::regex::icase);
  const std::regex style_attr(R"(<[^>]*\sstyle\s*=)", std::regex::icase);
  for (const console::EmbeddedFile& f : console::Files()) {
    const std::string text(f.data);
    if (f.name.ends_with(".html")) {
      EXPECT_FALSE(std::regex_search(text, inline_script)) << f.name << ": inline <script>";
      EXPECT_FALSE(std::regex_search(text, handler_attr)) << f.name << ": on… attribute";
      EXPECT_FALSE(std::regex_search(text, style_attr)) << f.name << ": style attribute";
      EXPECT_EQ(text.find("<style"), std::string::npos) << f.name << ": inline <style>";
    }
    if (f.name.ends_with(".js")) {
      for (const char* banned : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                                 "eval(", "new Function", "localStorage", "setAttribute('style'"}) {
        EXPECT_EQ(text.find(banned), std::string::npos) << f.name << " uses " << banned;
      }
    }
  }
}

}  // namespace
}  // namespace gpupool::api::rest
