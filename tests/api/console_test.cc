// The web console's static files over a real HttpServer on loopback (the page itself is driven in
// a real browser by tests/e2e/console_e2e_test.cc): each embedded file answers without a
// credential, with its exact type and the security headers, while the API beside it still
// demands one; and the files keep to what the Content-Security-Policy and the XSS rule need —
// no inline script, style or event handler, no HTML parsing of data, no persistent token.
#include "api/rest/console.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <cctype>
#include <string>
#include <vector>

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

// Single sign-on: sign-in.json says whether and where; the pages may then fetch from the provider's
// token endpoint (its origin only), and from nowhere else while the provider is unknown.
TEST(ConsoleSignInTest, SaysWhereToSignInAndLetsThePageReachOnlyThatOrigin) {
  testing::FakeApiService fake;
  auto auth = Authenticator::Create({{"console-test-token-0123456789", "acme", false}});
  ASSERT_TRUE(auth.ok());
  auto registry = std::make_shared<prometheus::Registry>();
  auto serve = [&](ConsoleSignInSource source, auto check) {
    HttpServerOptions o;
    o.console_sign_in = std::move(source);
    HttpServer server(fake, *auth, registry, "127.0.0.1:0", o);
    ASSERT_TRUE(server.Start().ok());
    check(server.port());
    server.Shutdown();
  };
  serve(nullptr, [](int port) {
    const HttpResult r = HttpCall(port, verb::get, "/console/sign-in.json");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, R"({"oidc":null})");
    ExpectSecurityHeaders(r, "sign-in.json");
    const HttpResult index = HttpCall(port, verb::get, "/console/");
    EXPECT_NE(std::string(index.headers["Content-Security-Policy"]).find("connect-src 'self';"),
              std::string::npos);
  });
  const ConsoleSignIn idp{"https://idp.example",      "gpupool-console",
                          "https://idp.example/auth", "https://login.idp.example:8443/token",
                          "openid gpupool",           "https://idp.example/logout"};
  serve([idp]() -> Result<std::optional<ConsoleSignIn>> { return std::optional(idp); },
        [](int port) {
          const HttpResult r = HttpCall(port, verb::get, "/console/sign-in.json");
          EXPECT_EQ(r.status, 200);
          EXPECT_EQ(r.body, R"({"oidc":{"authorizationEndpoint":"https://idp.example/auth",)"
                            R"("clientId":"gpupool-console",)"
                            R"("endSessionEndpoint":"https://idp.example/logout",)"
                            R"("issuer":"https://idp.example",)"
                            R"("scopes":"openid gpupool",)"
                            R"("tokenEndpoint":"https://login.idp.example:8443/token"}})");
          const HttpResult index = HttpCall(port, verb::get, "/console/");
          EXPECT_NE(std::string(index.headers["Content-Security-Policy"])
                        .find("connect-src 'self' https://login.idp.example:8443;"),
                    std::string::npos)
              << index.headers["Content-Security-Policy"];
        });
  serve(
      []() -> Result<std::optional<ConsoleSignIn>> {
        return Status::Unavailable("the identity provider's discovery document: refused");
      },
      [](int port) {
        const HttpResult r = HttpCall(port, verb::get, "/console/sign-in.json");
        EXPECT_EQ(r.status, 503);
        EXPECT_EQ(r.body, R"({"error":"the identity provider's discovery document: refused"})");
        const HttpResult index = HttpCall(port, verb::get, "/console/");
        EXPECT_NE(std::string(index.headers["Content-Security-Policy"]).find("connect-src 'self';"),
                  std::string::npos);
      });
}

TEST(ConsoleFilesTest, OriginsForTheContentSecurityPolicy) {
  EXPECT_EQ(UrlOrigin("https://idp.example/token"), "https://idp.example");
  EXPECT_EQ(UrlOrigin("http://127.0.0.1:5556/token?x=1"), "http://127.0.0.1:5556");
  EXPECT_EQ(UrlOrigin("https://idp.example"), "https://idp.example");
  EXPECT_EQ(UrlOrigin("javascript:alert(1)"), "");
  EXPECT_EQ(UrlOrigin("https://"), "");
  EXPECT_EQ(UrlOrigin("https://evil.example; script-src *"), "") << "nothing that ends the rule";
}

TEST(ConsoleFilesTest, TypesAreExact) {
  EXPECT_EQ(ConsoleContentType("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ConsoleContentType("x.bin"), "application/octet-stream");
}

// The opening tags of an HTML text, lower-cased ("<script type=module src=…>").
std::vector<std::string> Tags(std::string_view html) {
  std::vector<std::string> tags;
  for (size_t at = html.find('<'); at != std::string_view::npos; at = html.find('<', at + 1)) {
    const size_t end = html.find('>', at);
    if (end == std::string_view::npos) break;
    std::string tag(html.substr(at, end - at + 1));
    for (char& c : tag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    tags.push_back(std::move(tag));
  }
  return tags;
}

// True when `tag` has an attribute whose name starts with `prefix` (" on" → onclick=…).
bool HasAttribute(const std::string& tag, const std::string& prefix) {
  for (size_t at = tag.find(prefix); at != std::string::npos; at = tag.find(prefix, at + 1)) {
    size_t i = at + prefix.size();
    while (i < tag.size() && std::isalpha(static_cast<unsigned char>(tag[i]))) ++i;
    while (i < tag.size() && tag[i] == ' ') ++i;
    if (i < tag.size() && tag[i] == '=') return true;
  }
  return false;
}

TEST(ConsoleFilesTest, KeepToThePolicyAndTheTextOnlyRule) {
  for (const console::EmbeddedFile& f : console::Files()) {
    const std::string text(f.data);
    if (f.name.ends_with(".html")) {
      for (const std::string& tag : Tags(text)) {
        if (tag.starts_with("<script")) {
          EXPECT_TRUE(HasAttribute(tag, " src")) << f.name << ": inline " << tag;
        }
        EXPECT_FALSE(tag.starts_with("<style")) << f.name << ": inline <style>";
        EXPECT_FALSE(HasAttribute(tag, " on")) << f.name << ": event handler in " << tag;
        EXPECT_FALSE(HasAttribute(tag, " style")) << f.name << ": style attribute in " << tag;
      }
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
