// OIDC JWT bearer tokens end to end (docs/security.md, "OIDC bearer tokens"): a real gpupoold in
// the secure default with `auth.oidc` trusting a key made by the test. A token for a tenant-admin
// of acme calls over TLS with its claims' reach (its subtree, not another's), its calls are
// audited with the actor oidc:<sub>, and an expired token or one signed by another key gets
// UNAUTHENTICATED "invalid bearer token".
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "gpupool/v1/audit.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/jwt_mint.h"
#include "tests/support/oidc_provider.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::Claims;
using testing::DaemonProcess;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(OidcE2eTest, ATokenFromTheIssuerActsWithinItsClaimsAndIsAudited) {
  auto dir = testing::MakeTempDir("gpupool-oidc-e2e");
  ASSERT_TRUE(dir.ok());
  std::ofstream(*dir + "/idp.pem") << testing::Rsa().public_pem;
  std::ofstream(*dir + "/gpupoold.yaml")
      << "auth:\n  oidc:\n    issuer: https://idp.example\n    audience: gpupool\n"
      << "    public_key_file: " << *dir << "/idp.pem\n    algorithms: [RS256]\n";
  auto d = DaemonProcess::Start(
      {.data_dir = *dir, .extra_args = {"--config", *dir + "/gpupoold.yaml"}, .secure = true});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  DaemonProcess& daemon = **d;
  auto tenants = v1::TenantService::NewStub(daemon.Channel());
  auto create = [&](const std::string& credential, const std::string& path) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + credential);
    v1::CreateTenantRequest req;
    req.mutable_tenant()->set_path(path);
    v1::Tenant resp;
    return tenants->CreateTenant(&ctx, req, &resp);
  };
  for (const char* t : {"acme", "globex"}) ASSERT_TRUE(create(daemon.admin_token(), t).ok());

  Claims carol;
  carol.sub = "carol";
  carol.tenant = "acme";
  carol.role = "tenant-admin";
  carol.exp = Now() + 300;
  const std::string token = testing::Mint(carol, JWT_ALG_RS256, testing::Rsa().private_pem);
  grpc::Status st = create(token, "acme/team");
  EXPECT_TRUE(st.ok()) << st.error_message();
  st = create(token, "globex/team");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();

  Claims expired = carol;
  expired.exp = Now() - 3600;
  for (const std::string& bad :
       {testing::Mint(expired, JWT_ALG_RS256, testing::Rsa().private_pem),
        testing::Mint(carol, JWT_ALG_RS256, testing::OtherRsa().private_pem)}) {
    st = create(bad, "acme/other");
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(st.error_message(), "invalid bearer token");
  }

  // The audit log names the caller by its subject.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + daemon.admin_token());
  v1::ListAuditRecordsRequest req;
  req.set_verb("CreateTenant");
  v1::ListAuditRecordsResponse resp;
  ASSERT_TRUE(v1::AuditService::NewStub(daemon.Channel())->ListAuditRecords(&ctx, req, &resp).ok());
  int by_carol = 0;
  for (const v1::AuditRecord& r : resp.records()) {
    if (r.key_id() != "oidc:carol") continue;
    ++by_carol;
    EXPECT_EQ(r.principal(), "acme");
    EXPECT_EQ(r.role(), "tenant-admin");
  }
  EXPECT_EQ(by_carol, 2);  // the allowed call and the refused one
}

// Keys from the issuer's JWKS (no key file): a real OpenID provider on loopback publishes them.
// gpupoold starts before the provider (tokens refused, API keys fine), takes the provider's key
// once it is up, follows a rotation the first time a token names the new key, refuses a kid the
// provider does not publish, and keeps its keys through a provider outage.
TEST(OidcE2eTest, KeysComeFromTheIssuersJwksAndFollowARotation) {
  auto dir = testing::MakeTempDir("gpupool-oidc-jwks");
  ASSERT_TRUE(dir.ok());
  testing::OidcProvider::Options idp;
  idp.dir = *dir;
  idp.keys = {{"old", testing::Rsa().private_pem}};
  idp.redirect_uris = {"http://127.0.0.1:1/console/"};
  auto provider = std::make_unique<testing::OidcProvider>(idp);
  std::ofstream(*dir + "/gpupoold.yaml")
      << "auth:\n  oidc:\n    issuer: " << provider->issuer() << "\n    audience: gpupool\n";
  auto d = DaemonProcess::Start(
      {.data_dir = *dir, .extra_args = {"--config", *dir + "/gpupoold.yaml"}, .secure = true});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  DaemonProcess& daemon = **d;
  auto tenants = v1::TenantService::NewStub(daemon.Channel());
  // The call's status; whether it was authenticated is all that matters here.
  auto call = [&](const std::string& credential) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + credential);
    v1::ListTenantsResponse resp;
    return tenants->ListTenants(&ctx, v1::ListTenantsRequest(), &resp);
  };
  auto accepted = [&](const std::string& credential) {
    return call(credential).error_code() != grpc::StatusCode::UNAUTHENTICATED;
  };
  Claims dan;
  dan.iss = provider->issuer();
  dan.sub = "dan";
  dan.tenant = "acme";
  dan.exp = Now() + 600;
  const std::string by_old = testing::Mint(dan, JWT_ALG_RS256, testing::Rsa().private_pem, "old");
  const std::string by_new =
      testing::Mint(dan, JWT_ALG_RS256, testing::OtherRsa().private_pem, "new");

  // The provider is not up yet: its tokens cannot be checked, the admin's credential works.
  EXPECT_FALSE(accepted(by_old));
  EXPECT_TRUE(call(daemon.admin_token()).ok());
  ASSERT_TRUE(provider->Start().ok());
  EXPECT_TRUE(testing::WaitFor([&] { return accepted(by_old); }, std::chrono::seconds(30),
                               std::chrono::milliseconds(250)))
      << "gpupoold retries the provider every 5 s";
  EXPECT_FALSE(accepted(by_new)) << "not published yet";

  // Rotation: the provider signs with a new key and still publishes the old one. The first
  // token naming the new key makes gpupoold fetch again (30 s after its last fetch at most).
  provider->Stop();
  provider->set_keys(
      {{"new", testing::OtherRsa().private_pem}, {"old", testing::Rsa().private_pem}});
  ASSERT_TRUE(provider->Start().ok());
  EXPECT_TRUE(testing::WaitFor([&] { return accepted(by_new); }, std::chrono::seconds(45),
                               std::chrono::milliseconds(500)));
  EXPECT_TRUE(accepted(by_old));
  const std::string forged =
      testing::Mint(dan, JWT_ALG_RS256, testing::OtherRsa().private_pem, "made-up");
  EXPECT_FALSE(accepted(forged));

  // An outage of the provider signs nobody out.
  provider->Stop();
  EXPECT_TRUE(accepted(by_new));
  EXPECT_TRUE(accepted(by_old));
}

}  // namespace
}  // namespace gpupool
