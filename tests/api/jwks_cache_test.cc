// JwksCache (api/jwks_cache.h) against a real OpenID provider on loopback (tests/oidc_provider:
// panva's oidc-provider under Node.js): keys and discovery fetched over HTTP, a rotation followed
// when a token names a new key, unknown key ids rate-limited, an outage that keeps the keys.
#include "api/jwks_cache.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/jwt_mint.h"
#include "tests/support/oidc_provider.h"

namespace gpupool::api {
namespace {

using namespace std::chrono_literals;
using testing::OidcProvider;

class JwksCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-jwks");
    ASSERT_TRUE(dir.ok());
    OidcProvider::Options o;
    o.dir = *dir;
    o.keys = {{"a", testing::Rsa().private_pem}};
    o.redirect_uris = {"http://127.0.0.1:1/console/"};
    provider_ = std::make_unique<OidcProvider>(o);
  }

  std::unique_ptr<JwksCache> Cache(JwksCacheOptions o = {}) {
    o.issuer = provider_->issuer();
    return std::make_unique<JwksCache>(o, HttpFetcher(5s, ""));
  }

  static std::vector<std::string> Kids(const std::vector<Jwk>& keys) {
    std::vector<std::string> out;
    for (const Jwk& k : keys) out.push_back(k.kid);
    return out;
  }

  std::unique_ptr<OidcProvider> provider_;
};

TEST_F(JwksCacheTest, FetchesTheKeysAndFollowsARotation) {
  ASSERT_TRUE(provider_->Start().ok());
  JwksCacheOptions o;
  o.min_refetch = 0ms;
  auto cache = Cache(o);
  cache->Start();
  const std::vector<Jwk> a = cache->KeysFor("a");
  ASSERT_EQ(Kids(a), std::vector<std::string>{"a"});
  EXPECT_EQ(a[0].pem, testing::Rsa().public_pem) << "the provider's key, as it publishes it";
  Result<OidcDiscovery> d = cache->Discovery();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->issuer, provider_->issuer());
  EXPECT_EQ(d->token_endpoint, provider_->issuer() + "/token");
  EXPECT_EQ(d->authorization_endpoint, provider_->issuer() + "/auth");

  // The provider rotates: a new signing key first, the old one still published.
  provider_->Stop();
  provider_->set_keys({{"b", testing::OtherRsa().private_pem}, {"a", testing::Rsa().private_pem}});
  ASSERT_TRUE(provider_->Start().ok());
  EXPECT_EQ(Kids(cache->KeysFor("b")), std::vector<std::string>{"b"});
  EXPECT_EQ(Kids(cache->KeysFor("")), (std::vector<std::string>{"b", "a"}));
  // Then it retires the old key: gone at the next fetch.
  provider_->Stop();
  provider_->set_keys({{"b", testing::OtherRsa().private_pem}});
  ASSERT_TRUE(provider_->Start().ok());
  EXPECT_TRUE(cache->KeysFor("c").empty());  // an unknown kid: a fetch, which drops "a"
  EXPECT_TRUE(cache->KeysFor("a").empty());
}

TEST_F(JwksCacheTest, UnknownKeyIdsCannotMakeItHammerTheProvider) {
  ASSERT_TRUE(provider_->Start().ok());
  JwksCacheOptions o;
  o.min_refetch = 800ms;
  auto cache = Cache(o);
  cache->Start();
  ASSERT_FALSE(cache->KeysFor("a").empty());
  const int64_t after_start = cache->fetches();
  std::this_thread::sleep_for(900ms);
  EXPECT_TRUE(cache->KeysFor("made-up-1").empty());
  EXPECT_EQ(cache->fetches(), after_start + 1) << "the first unknown kid is worth a look";
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(cache->KeysFor("made-up-" + std::to_string(i)).empty());
  EXPECT_EQ(cache->fetches(), after_start + 1) << "the others, within min_refetch, are not";
}

TEST_F(JwksCacheTest, AnOutageKeepsTheKeysItHas) {
  ASSERT_TRUE(provider_->Start().ok());
  JwksCacheOptions o;
  o.refresh = 100ms;
  o.retry = 100ms;
  auto cache = Cache(o);
  cache->Start();
  ASSERT_FALSE(cache->KeysFor("a").empty());
  provider_->Stop();
  const int64_t before = cache->fetches();
  ASSERT_TRUE(testing::WaitFor([&] { return cache->fetches() >= before + 3; }, 20s));
  EXPECT_EQ(Kids(cache->KeysFor("a")), std::vector<std::string>{"a"});
  EXPECT_TRUE(cache->Discovery().ok());
}

TEST_F(JwksCacheTest, BeforeTheProviderAnswersThereAreNoKeysAndItSaysWhy) {
  JwksCacheOptions o;
  o.retry = 100ms;
  o.wait_for_fetch = 300ms;
  auto cache = Cache(o);
  cache->Start();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(cache->KeysFor("a").empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "a verification waits, but briefly";
  Result<OidcDiscovery> d = cache->Discovery();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(d.status().message().find("/.well-known/openid-configuration"), std::string::npos)
      << d.status().message();
  // It comes up: the keys arrive at the next retry.
  ASSERT_TRUE(provider_->Start().ok());
  EXPECT_TRUE(testing::WaitFor([&] { return !cache->KeysFor("a").empty(); }, 20s));
}

}  // namespace
}  // namespace gpupool::api
