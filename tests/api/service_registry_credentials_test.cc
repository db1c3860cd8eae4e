// ServiceImpl's registry credentials (api/service_registry_credentials.cc) on the real stack
// (tests/api/service_harness.h) with the memory credential store: who may create, list and
// delete them, that no answer ever carries the secret, and what SubmitJob accepts as a job's
// registry_credential.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/service_impl.h"
#include "store/memory_registry_credentials.h"
#include "tests/api/service_harness.h"
#include "tests/support/status_macros.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using ::testing::HasSubstr;
using testing::ServiceHarness;
using testing::Tenant;

constexpr char kSecret[] = "robot-token-do-not-leak";

class RegistryCredentialServiceTest : public ::testing::Test {
 protected:
  RegistryCredentialServiceTest() : h_({}, Options(&store_)) {}
  static ServiceOptions Options(RegistryCredentialStore* store) {
    ServiceOptions o;
    o.registry_credentials = store;
    return o;
  }

  std::pair<Status, v1::RegistryCredential> Create(const std::string& tenant,
                                                   const std::string& name, const CallContext& ctx,
                                                   bool replace = false,
                                                   const std::string& secret = kSecret) {
    v1::CreateRegistryCredentialRequest req;
    v1::RegistryCredential* c = req.mutable_credential();
    c->set_tenant(tenant);
    c->set_name(name);
    c->set_registry("registry.acme.example");
    c->set_username("robot");
    c->set_secret(secret);
    req.set_replace(replace);
    return h_.Call(&ApiService::CreateRegistryCredential, req, ctx);
  }
  // "tenant/name" of each listed credential, or the error.
  std::vector<std::string> List(const CallContext& ctx, const std::string& tenant = "") {
    v1::ListRegistryCredentialsRequest req;
    req.set_tenant(tenant);
    auto [s, resp] = h_.Call(&ApiService::ListRegistryCredentials, req, ctx);
    if (!s.ok()) return {s.ToString()};
    std::vector<std::string> out;
    for (const v1::RegistryCredential& c : resp.credentials()) {
      EXPECT_TRUE(c.secret().empty());
      EXPECT_EQ(c.DebugString().find(kSecret), std::string::npos);
      out.push_back(c.tenant() + "/" + c.name());
    }
    return out;
  }
  Status Delete(const std::string& tenant, const std::string& name, const CallContext& ctx) {
    v1::DeleteRegistryCredentialRequest req;
    req.set_tenant(tenant);
    req.set_name(name);
    return h_.Call(&ApiService::DeleteRegistryCredential, req, ctx).first;
  }
  v1::SubmitJobRequest ImageJob(const std::string& tenant, const std::string& credential,
                                const std::string& image = "registry.acme.example/team/app:1") {
    v1::SubmitJobRequest req = ServiceHarness::Job(tenant, "gpu");
    req.mutable_spec()->mutable_template_()->set_image(image);
    req.mutable_spec()->mutable_template_()->set_registry_credential(credential);
    return req;
  }

  MemoryRegistryCredentials store_;
  ServiceHarness h_;
};

TEST_F(RegistryCredentialServiceTest, ATenantAdminKeepsCredentialsForItsSubtreeOnly) {
  auto [s, made] = Create("acme", "hub", Tenant("acme", Role::kTenantAdmin));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(made.registry(), "registry.acme.example");
  EXPECT_TRUE(made.secret().empty());
  EXPECT_EQ(made.created_by(), "test:acme");
  EXPECT_TRUE(Create("acme/research", "hub", Tenant("acme", Role::kTenantAdmin)).first.ok());

  // A member may not create one; a tenant-admin may not create one for another tenant.
  EXPECT_EQ(Create("acme", "m", Tenant("acme", Role::kMember)).first.code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Create("globex", "x", Tenant("acme", Role::kTenantAdmin)).first.code(),
            StatusCode::kPermissionDenied);
  // The same name again is refused unless replacing.
  EXPECT_EQ(Create("acme", "hub", Admin()).first.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(Create("acme", "hub", Admin(), true, "rotated").first.ok());
  ASSERT_OK_AND_ASSIGN(std::optional<RegistryCredentialRecord> stored, store_.Get("acme", "hub"));
  EXPECT_EQ(stored->password, "rotated");
  EXPECT_EQ(stored->created_by, "test:acme");  // a rotation keeps its creator
}

TEST_F(RegistryCredentialServiceTest, BadInputIsRefusedNamingTheFieldAndNeverTheSecret) {
  const CallContext admin = Admin();
  auto refused = [&](const std::string& name, const std::string& registry,
                     const std::string& secret) {
    v1::CreateRegistryCredentialRequest req;
    req.mutable_credential()->set_tenant("acme");
    req.mutable_credential()->set_name(name);
    req.mutable_credential()->set_registry(registry);
    req.mutable_credential()->set_username("robot");
    req.mutable_credential()->set_secret(secret);
    Status st = h_.Call(&ApiService::CreateRegistryCredential, req, admin).first;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message().find(kSecret), std::string::npos);
    return st.message();
  };
  EXPECT_THAT(refused("Hub", "registry.acme.example", kSecret), HasSubstr("credential.name"));
  EXPECT_THAT(refused("hub", "https://registry.acme.example", kSecret),
              HasSubstr("credential.registry"));
  EXPECT_THAT(refused("hub", "registry.acme.example", ""), HasSubstr("credential.secret"));
  EXPECT_THAT(refused("hub", "registry.acme.example", std::string(kSecret) + '\0'),
              HasSubstr("credential.secret"));
}

TEST_F(RegistryCredentialServiceTest, ATenantListsWhatItMayUseAndNothingOfOthers) {
  for (const char* t : {"acme", "acme/research", "acme/infra", "globex"}) {
    ASSERT_TRUE(Create(t, "hub", Admin()).first.ok()) << t;
  }
  // Its own, and its ancestor's (which its jobs may use); not its sibling's or another org's.
  EXPECT_EQ(List(Tenant("acme/research", Role::kViewer)),
            (std::vector<std::string>{"acme/hub", "acme/research/hub"}));
  EXPECT_EQ(List(Tenant("acme", Role::kTenantAdmin)),
            (std::vector<std::string>{"acme/hub", "acme/infra/hub", "acme/research/hub"}));
  EXPECT_EQ(List(Admin(), "acme/infra"), (std::vector<std::string>{"acme/infra/hub"}));
  EXPECT_EQ(List(Admin()).size(), 4u);
}

TEST_F(RegistryCredentialServiceTest, DeletionIsATenantAdminsAndOthersSeeNotFound) {
  ASSERT_TRUE(Create("acme", "hub", Admin()).first.ok());
  EXPECT_EQ(Delete("acme", "hub", Tenant("acme", Role::kMember)).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Delete("acme", "hub", Tenant("globex", Role::kTenantAdmin)).code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(Delete("acme", "hub", Tenant("acme", Role::kTenantAdmin)).ok());
  EXPECT_EQ(Delete("acme", "hub", Admin()).code(), StatusCode::kNotFound);
}

TEST_F(RegistryCredentialServiceTest, AJobNamesAStoredCredentialItsTenantMayUseForItsRegistry) {
  ASSERT_TRUE(h_.CreatePool("gpu").first.ok());
  ASSERT_TRUE(Create("acme", "hub", Admin()).first.ok());
  const CallContext member = Tenant("acme/research", Role::kMember);
  auto [ok, resp] = h_.Submit(ImageJob("acme/research", "hub"), member);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(resp.job().spec().template_().registry_credential(), "hub");

  auto refused = [&](const v1::SubmitJobRequest& req, const CallContext& ctx) {
    Status st = h_.Submit(req, ctx).first;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    return st.message();
  };
  EXPECT_THAT(refused(ImageJob("acme/research", "nope"), member),
              HasSubstr("spec.template.registry_credential: 'nope' is neither a secret_env entry "
                        "nor a registry credential of tenant 'acme/research'"));
  EXPECT_THAT(refused(ImageJob("globex", "hub"), Tenant("globex")), HasSubstr("'hub' is neither"));
  EXPECT_THAT(refused(ImageJob("acme", "hub", "registry.other.example/app:1"), Admin()),
              HasSubstr("registry credential 'hub' is for 'registry.acme.example', and the image "
                        "is from 'registry.other.example'"));
}

TEST_F(RegistryCredentialServiceTest, ADeletedTenantsCredentialsGoWithIt) {
  // A tenant made later at the same path must not inherit them.
  for (const char* t : {"acme", "acme/research"}) {
    v1::CreateTenantRequest req;
    req.mutable_tenant()->set_path(t);
    ASSERT_TRUE(h_.Call(&ApiService::CreateTenant, req, Admin()).first.ok()) << t;
    ASSERT_TRUE(Create(t, "hub", Admin()).first.ok()) << t;
  }
  v1::DeleteTenantRequest del;
  del.set_path("acme/research");
  ASSERT_TRUE(h_.Call(&ApiService::DeleteTenant, del, Admin()).first.ok());
  EXPECT_EQ(List(Admin()), (std::vector<std::string>{"acme/hub"}));
  // Deleting it again answers NOT_FOUND, as before.
  EXPECT_EQ(h_.Call(&ApiService::DeleteTenant, del, Admin()).first.code(), StatusCode::kNotFound);
}

TEST(RegistryCredentialServiceWithoutStoreTest, OnlyAJobsOwnSecretEnvEntryCanBeNamed) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").first.ok());
  v1::SubmitJobRequest req = ServiceHarness::Job("acme", "gpu");
  req.mutable_spec()->mutable_template_()->set_image("registry.acme.example/app:1");
  req.mutable_spec()->mutable_template_()->set_registry_credential("hub");
  Status st = h.Submit(req).first;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("this server keeps no registry credentials"));
  v1::CreateRegistryCredentialRequest create;
  EXPECT_EQ(h.Call(&ApiService::CreateRegistryCredential, create, Admin()).first.code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gpupool::api
