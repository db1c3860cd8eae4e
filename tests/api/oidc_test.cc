// OIDC JWT bearer tokens (api/oidc.h): tokens minted here with libjwt and OpenSSL keys made by
// the test, checked by OidcVerifier alone and through the Authenticator. Every bad token gets the
// one "invalid bearer token".
#include "api/oidc.h"

#include <gtest/gtest.h>

#include <map>

#include "api/auth.h"
#include "tests/support/jwt_mint.h"

namespace gpupool::api {
namespace {

constexpr int64_t kNow = 1'800'000'000;
using testing::Claims;
using testing::Ec;
using testing::Mint;
using testing::OtherRsa;
using testing::Rsa;

std::shared_ptr<const OidcVerifier> Verifier(const std::string& public_pem,
                                             std::vector<std::string> algs = {"RS256", "ES256"}) {
  OidcOptions o;
  o.issuer = "https://idp.example";
  o.audience = "gpupool";
  o.public_key_pem = public_pem;
  o.algorithms = std::move(algs);
  auto v = OidcVerifier::Create(std::move(o), [] { return kNow; });
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : nullptr;
}

TEST(OidcTest, AGoodTokenBecomesTheCallerItNames) {
  auto rs = Verifier(Rsa().public_pem);
  Result<CallContext> c = rs->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key_id, "oidc:alice");
  EXPECT_EQ(c->scope, "acme/team");
  EXPECT_EQ(c->role, Role::kMember);

  auto es = Verifier(Ec().public_pem);
  Claims viewer;
  viewer.role = "viewer";
  c = es->Verify(Mint(viewer, JWT_ALG_ES256, Ec().private_pem));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, Role::kViewer);

  Claims admin;  // an admin's tenant claim is ignored: its scope is the whole tree
  admin.role = "admin";
  admin.tenant = "";
  c = rs->Verify(Mint(admin, JWT_ALG_RS256, Rsa().private_pem));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->admin());
  EXPECT_EQ(c->key_id, "oidc:alice");

  Claims listed;  // aud as a list that holds the audience
  listed.aud_json = R"(["other", "gpupool"])";
  EXPECT_TRUE(rs->Verify(Mint(listed, JWT_ALG_RS256, Rsa().private_pem)).ok());

  Claims skewed;  // expired 30 s ago, not valid for 30 s yet: within the 60 s of skew
  skewed.exp = kNow - 30;
  skewed.nbf = kNow + 30;
  EXPECT_TRUE(rs->Verify(Mint(skewed, JWT_ALG_RS256, Rsa().private_pem)).ok());
}

TEST(OidcTest, EveryBadTokenIsTheSameInvalidBearerToken) {
  auto rs = Verifier(Rsa().public_pem);
  std::map<std::string, std::string> bad;
  auto with = [](auto edit) {
    Claims c;
    edit(c);
    return Mint(c, JWT_ALG_RS256, Rsa().private_pem);
  };
  bad["expired"] = with([](Claims& c) { c.exp = kNow - 61; });
  bad["no exp"] = with([](Claims& c) { c.exp = 0; });
  bad["not yet valid"] = with([](Claims& c) { c.nbf = kNow + 61; });
  bad["wrong audience"] = with([](Claims& c) { c.aud = "someone-else"; });
  bad["audience list without us"] = with([](Claims& c) { c.aud_json = R"(["a", "b"])"; });
  bad["no audience"] = with([](Claims& c) { c.aud = ""; });
  bad["wrong issuer"] = with([](Claims& c) { c.iss = "https://evil.example"; });
  bad["no subject"] = with([](Claims& c) { c.sub = ""; });
  bad["subject with a space"] = with([](Claims& c) { c.sub = "a b"; });
  bad["unknown role"] = with([](Claims& c) { c.role = "owner"; });
  bad["no role"] = with([](Claims& c) { c.role = ""; });
  bad["no tenant"] = with([](Claims& c) { c.tenant = ""; });
  bad["bad tenant"] = with([](Claims& c) { c.tenant = "A B"; });
  bad["wrong key"] = Mint({}, JWT_ALG_RS256, OtherRsa().private_pem);
  bad["alg none"] = Mint({}, JWT_ALG_NONE, "");
  // The confusion attack: HMAC keyed with the issuer's (public) key.
  bad["HS256 with the public key"] = Mint({}, JWT_ALG_HS256, Rsa().public_pem);
  bad["ES256 where only RS256 fits the key"] = Mint({}, JWT_ALG_ES256, Ec().private_pem);
  std::string good = Mint({}, JWT_ALG_RS256, Rsa().private_pem);
  bad["tampered payload"] =
      good.substr(0, good.find('.') + 1) + "eyJzdWIiOiJtYWxsb3J5In0" + good.substr(good.rfind('.'));
  bad["empty"] = "";
  bad["garbage"] = "a.b.c";
  for (const auto& [what, token] : bad) {
    if (what != "empty") {
      EXPECT_FALSE(token.empty()) << what << ": not minted";
    }
    Result<CallContext> c = rs->Verify(token);
    ASSERT_FALSE(c.ok()) << what;
    EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated) << what;
    EXPECT_EQ(c.status().message(), "invalid bearer token") << what;
  }
}

TEST(OidcTest, ThroughTheAuthenticator) {
  auto rs = Verifier(Rsa().public_pem);
  auto auth = Authenticator::Create({{"bootstrap-token-0123", "ops", true, Role::kAdmin}}, nullptr,
                                    [rs](std::string_view t) { return rs->Verify(t); });
  ASSERT_TRUE(auth.ok());
  Result<CallContext> c =
      auth->Authenticate("Bearer " + Mint({}, JWT_ALG_RS256, Rsa().private_pem));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->key_id, "oidc:alice");
  Claims expired;
  expired.exp = kNow - 3600;
  c = auth->Authenticate("Bearer " + Mint(expired, JWT_ALG_RS256, Rsa().private_pem));
  EXPECT_EQ(c.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(c.status().message(), "invalid bearer token");
  EXPECT_TRUE(auth->Authenticate("Bearer bootstrap-token-0123").ok());
  EXPECT_TRUE(LooksLikeJwt("aa.bb.cc"));
  EXPECT_FALSE(LooksLikeJwt("aa.bb."));
  EXPECT_FALSE(LooksLikeJwt("aa.bb"));
  EXPECT_FALSE(LooksLikeJwt("gpk_0123_abcd"));
}

TEST(OidcTest, OptionsAreCheckedAtStart) {
  struct Case {
    std::string key;
    std::vector<std::string> algs;
    int64_t skew;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"not a key", {"RS256"}, 60, "auth.oidc.public_key_file: not a PEM public key"},
      {Rsa().private_pem, {"RS256"}, 60, "auth.oidc.public_key_file: not a PEM public key"},
      {Rsa().public_pem, {"HS256"}, 60, "auth.oidc.algorithms: 'HS256' is not supported"},
      {Rsa().public_pem, {"ES256"}, 60, "auth.oidc.algorithms: none of them fits the key"},
      {Rsa().public_pem, {}, 60, "auth.oidc.algorithms: must name"},
      {Rsa().public_pem, {"RS256"}, 301, "auth.oidc.clock_skew_s: must be between 0 and 300"},
  };
  for (const Case& c : cases) {
    OidcOptions o;
    o.issuer = "https://idp.example";
    o.audience = "gpupool";
    o.public_key_pem = c.key;
    o.algorithms = c.algs;
    o.clock_skew_s = c.skew;
    auto v = OidcVerifier::Create(o);
    ASSERT_FALSE(v.ok()) << c.expected;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find(c.expected), std::string::npos) << v.status().message();
  }
}

// Keys from the issuer's JWKS (api/jwks_cache.h gives them): the token's kid picks the key; a
// token that names another key, or is signed by a key it does not name, is refused; the
// console's client id is accepted as the audience beside the configured one.
TEST(OidcTest, KeysPublishedByTheIssuerArePickedByTheTokensKid) {
  Result<std::vector<Jwk>> set =
      ParseJwks(R"({"keys":[)" + testing::JwkOf(Rsa(), "old") + "," +
                testing::JwkOf(OtherRsa(), "new") + "," + testing::JwkOf(Ec(), "ec") + "]}");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  std::vector<std::string> asked;
  OidcOptions o;
  o.issuer = "https://idp.example";
  o.audience = "gpupool";
  o.console_client_id = "gpupool-console";
  o.keys = [&](std::string_view kid) {
    asked.emplace_back(kid);
    std::vector<Jwk> out;
    for (const Jwk& k : *set) {
      if (kid.empty() || k.kid == kid) out.push_back(k);
    }
    return out;
  };
  auto v = OidcVerifier::Create(o, [] { return kNow; });
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE((*v)->Verify(Mint({}, JWT_ALG_RS256, OtherRsa().private_pem, "new")).ok());
  EXPECT_TRUE((*v)->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem, "old")).ok());
  EXPECT_TRUE((*v)->Verify(Mint({}, JWT_ALG_ES256, Ec().private_pem, "ec")).ok());
  EXPECT_TRUE((*v)->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem)).ok()) << "no kid: any key";
  EXPECT_EQ((std::vector<std::string>{"new", "old", "ec", ""}), asked);
  // Signed by one key, naming another.
  EXPECT_FALSE((*v)->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem, "new")).ok());
  // A kid the issuer does not publish.
  EXPECT_FALSE((*v)->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem, "gone")).ok());
  // An EC key's kid on an RS256 token: the algorithm is the key's, not the token's.
  EXPECT_FALSE((*v)->Verify(Mint({}, JWT_ALG_RS256, Rsa().private_pem, "ec")).ok());
  Claims console;
  console.aud = "gpupool-console";
  EXPECT_TRUE((*v)->Verify(Mint(console, JWT_ALG_RS256, Rsa().private_pem, "old")).ok());
  console.aud = "another-client";
  EXPECT_FALSE((*v)->Verify(Mint(console, JWT_ALG_RS256, Rsa().private_pem, "old")).ok());

  OidcOptions both = o;
  both.public_key_pem = Rsa().public_pem;
  Result<std::shared_ptr<const OidcVerifier>> bad = OidcVerifier::Create(both);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not both"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::api
