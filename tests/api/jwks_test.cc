// The provider's metadata parsed (api/jwks.h): JWK Sets with RSA and EC keys made by OpenSSL in
// the test, turned back into the same PEM public keys; what is skipped and what is refused;
// discovery documents; the JWS header a verifier picks its key by.
#include "api/jwks.h"

#include <gtest/gtest.h>

#include "tests/support/jwt_mint.h"

namespace gpupool::api {
namespace {

using testing::Ec;
using testing::JwkOf;
using testing::NewKey;
using testing::Rsa;

std::string SetOf(const std::vector<std::string>& keys) {
  std::string out = R"({"keys":[)";
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? "," : "") + keys[i];
  return out + "]}";
}

TEST(JwksTest, RsaAndEcKeysBecomeTheSamePublicKeys) {
  Result<std::vector<Jwk>> keys = ParseJwks(SetOf({JwkOf(Rsa(), "r1"), JwkOf(Ec(), "e1")}));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].kid, "r1");
  EXPECT_EQ((*keys)[0].kty, "RSA");
  EXPECT_EQ((*keys)[0].pem, Rsa().public_pem);
  EXPECT_EQ((*keys)[1].kid, "e1");
  EXPECT_EQ((*keys)[1].kty, "EC");
  EXPECT_EQ((*keys)[1].pem, Ec().public_pem);
}

TEST(JwksTest, SkipsKeysItDoesNotVerifyWith) {
  const std::string enc = R"({"kty":"RSA","use":"enc","kid":"enc","n":"AQAB","e":"AQAB"})";
  const std::string ps = R"({"kty":"RSA","alg":"PS256","kid":"ps","n":"AQAB","e":"AQAB"})";
  const std::string okp = R"({"kty":"OKP","crv":"Ed25519","kid":"ed","x":"AAAA"})";
  const std::string p384 = R"({"kty":"EC","crv":"P-384","kid":"p384","x":"AA","y":"AA"})";
  Result<std::vector<Jwk>> keys = ParseJwks(SetOf({enc, ps, okp, p384, JwkOf(Rsa(), "r1")}));
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].kid, "r1");
}

TEST(JwksTest, RefusesWhatIsNotAUsableSet) {
  const testing::KeyPair weak = NewKey(/*rsa=*/true, 1024);
  std::string off_curve = JwkOf(Ec(), "e1");
  const size_t y = off_curve.find(R"("y":")") + 5;
  off_curve[y] = off_curve[y] == 'A' ? 'B' : 'A';
  for (const auto& [json, expected] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not a JSON object"},
           {R"({"keys":{}})", "\"keys\" must be an array"},
           {R"({"keys":[]})", "no RS256 or ES256 signing key"},
           {SetOf({JwkOf(Rsa(), "k"), JwkOf(Ec(), "k")}), "kid 'k' is used by an earlier key"},
           {SetOf({JwkOf(weak, "w")}), "2048 or more"},
           {SetOf({off_curve}), "keys[0]: not a valid EC public key"},
           {SetOf({R"({"kty":"RSA","kid":"x","n":"a+b","e":"AQAB"})"}), "keys[0].n: not base64url"},
           {SetOf({R"({"kty":"RSA","kid":"x","e":"AQAB"})"}), "keys[0].n: missing"},
           {SetOf({R"({"kty":"EC","crv":"P-256","kid":"x","x":"AA","y":"AA"})"}), "32 bytes each"},
       }) {
    Result<std::vector<Jwk>> keys = ParseJwks(json);
    ASSERT_FALSE(keys.ok()) << json;
    EXPECT_NE(keys.status().message().find(expected), std::string::npos) << keys.status().message();
  }
}

TEST(JwksTest, DiscoveryMustNameTheConfiguredIssuerAndItsEndpoints) {
  const std::string doc =
      R"({"issuer":"https://idp.example","authorization_endpoint":"https://idp.example/auth",)"
      R"("token_endpoint":"https://idp.example/token","jwks_uri":"https://idp.example/jwks"})";
  Result<OidcDiscovery> d = ParseOidcDiscovery(doc, "https://idp.example");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->authorization_endpoint, "https://idp.example/auth");
  EXPECT_EQ(d->token_endpoint, "https://idp.example/token");
  EXPECT_EQ(d->jwks_uri, "https://idp.example/jwks");
  EXPECT_EQ(d->end_session_endpoint, "") << "optional";
  Result<OidcDiscovery> other = ParseOidcDiscovery(doc, "https://idp.example/tenant");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("is not the configured issuer"), std::string::npos);
  Result<OidcDiscovery> partial = ParseOidcDiscovery(
      R"({"issuer":"i","authorization_endpoint":"a","token_endpoint":"t"})", "i");
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("jwks_uri: missing"), std::string::npos);
}

TEST(JwksTest, PeeksAtTheHeaderWithoutTrustingIt) {
  const std::string token = testing::Mint({}, JWT_ALG_RS256, Rsa().private_pem, "r1");
  Result<JwsHeader> h = PeekJwsHeader(token);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->kid, "r1");
  EXPECT_EQ(h->alg, "RS256");
  EXPECT_FALSE(PeekJwsHeader("nodots").ok());
  EXPECT_FALSE(PeekJwsHeader("!!!.a.b").ok());
  EXPECT_EQ(*Base64UrlDecode("aGk"), "hi");
  EXPECT_EQ(*Base64UrlDecode("aGk="), "hi");
  EXPECT_FALSE(Base64UrlDecode("a").ok());
}

}  // namespace
}  // namespace gpupool::api
