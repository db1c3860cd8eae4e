// Registry credentials kept per tenant (scheduler/registry_credentials.h): which one a job's
// tenant resolves, and what the gateway the daemon gives the scheduler sends to a node — the
// stored secret only for a task that names it, only to the image's own registry, read at each
// start (so a rotation is used at once), and nothing when it is gone.
#include "scheduler/registry_credentials.h"

#include <gtest/gtest.h>

#include "store/memory_registry_credentials.h"

namespace gpupool {
namespace {

RegistryCredentialRecord Cred(const std::string& tenant, const std::string& name,
                              const std::string& secret,
                              const std::string& registry = "registry.acme.example") {
  RegistryCredentialRecord c;
  c.tenant = tenant;
  c.name = name;
  c.registry = registry;
  c.username = "robot";
  c.password = secret;
  c.created_by = "key:0123456789ab";
  c.create_ms = c.update_ms = 1;
  return c;
}

class RecordingGateway final : public AgentGateway {
 public:
  bool StartTask(const std::string&, const StartTaskCommand& cmd) override {
    starts.push_back(cmd);
    return true;
  }
  bool StopTask(const std::string&, const StopTaskCommand&) override { return true; }
  bool PinImages(const std::string&, const PinImagesCommand& cmd) override {
    pins.push_back(cmd);
    return true;
  }
  bool SetMigLayout(const std::string&, const MigLayoutCommand& cmd) override {
    mig.push_back(cmd);
    return true;
  }
  std::vector<StartTaskCommand> starts;
  std::vector<PinImagesCommand> pins;
  std::vector<MigLayoutCommand> mig;
};

StartTaskCommand Start(const std::string& tenant, const std::string& credential,
                       const std::string& image = "registry.acme.example/team/app:1") {
  StartTaskCommand cmd;
  cmd.task_id = "7-0";
  cmd.tenant = tenant;
  cmd.image = image;
  cmd.registry_credential_env = credential;
  cmd.env = {{"EPOCHS", "3"}};
  return cmd;
}

TEST(RegistryCredentialsTest, ATenantUsesItsOwnElseItsNearestAncestors) {
  MemoryRegistryCredentials store;
  ASSERT_TRUE(store.Put(Cred("acme", "hub", "org-secret"), false).ok());
  ASSERT_TRUE(store.Put(Cred("acme/research", "hub", "team-secret"), false).ok());
  auto secret_of = [&](const std::string& tenant) -> std::string {
    Result<std::optional<RegistryCredentialRecord>> c =
        ResolveRegistryCredential(store, tenant, "hub");
    EXPECT_TRUE(c.ok());
    return c.ok() && c->has_value() ? (*c)->password : "<none>";
  };
  EXPECT_EQ(secret_of("acme/research/alice"), "team-secret");
  EXPECT_EQ(secret_of("acme/research"), "team-secret");
  EXPECT_EQ(secret_of("acme/infra"), "org-secret");
  EXPECT_EQ(secret_of("acme"), "org-secret");
  EXPECT_EQ(secret_of("acme2"), "<none>");  // a sibling by prefix only is not below "acme"
  EXPECT_EQ(secret_of("globex"), "<none>");
}

TEST(RegistryCredentialsTest, NamesAndRegistriesAreCheckedNamingTheField) {
  EXPECT_TRUE(CheckRegistryCredentialName("acme-hub.v2_1", "f").ok());
  for (const char* bad : {"", "Hub", "-hub", "a/b", "hub!"}) {
    Status st = CheckRegistryCredentialName(bad, "credential.name");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(st.message().starts_with("credential.name: ")) << st.message();
  }
  EXPECT_FALSE(CheckRegistryCredentialName(std::string(64, 'a'), "f").ok());
  EXPECT_EQ(*NormaliseRegistryHost("127.0.0.1:5000", "f"), "127.0.0.1:5000");
  EXPECT_EQ(*NormaliseRegistryHost("index.docker.io", "f"), "docker.io");
  EXPECT_EQ(*NormaliseRegistryHost("localhost", "f"), "localhost");
  for (const char* bad : {"", "acme", "registry.acme.example/team", "https://r.example"}) {
    Result<std::string> r = NormaliseRegistryHost(bad, "credential.registry");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().message().starts_with("credential.registry: ")) << bad;
  }
}

// Every command passes through the wrapper: one it does not forward is dropped in gpupoold
// (a MIG layout once was, and no agent ever re-partitioned a GPU).
TEST(CredentialInjectingGatewayTest, EveryOtherCommandPassesThrough) {
  MemoryRegistryCredentials store;
  RecordingGateway inner;
  CredentialInjectingGateway gateway(&inner, &store);
  EXPECT_TRUE(gateway.PinImages("n1", PinImagesCommand{{"busybox:1.36"}, 3}));
  EXPECT_TRUE(gateway.SetMigLayout("n1", MigLayoutCommand{"GPU-0", "7g.80gb@0", 2, 3}));
  ASSERT_EQ(inner.pins.size(), 1u);
  ASSERT_EQ(inner.mig.size(), 1u);
  EXPECT_EQ(inner.mig[0].layout, "7g.80gb@0");
  EXPECT_EQ(inner.mig[0].generation, 2);
}

TEST(CredentialInjectingGatewayTest, AStoredCredentialTravelsOnlyToTheImagesRegistry) {
  MemoryRegistryCredentials store;
  ASSERT_TRUE(store.Put(Cred("acme", "hub", "org-secret"), false).ok());
  ASSERT_TRUE(store.Put(Cred("acme", "elsewhere", "other", "registry.other.example"), false).ok());
  RecordingGateway inner;
  CredentialInjectingGateway gateway(&inner, &store);

  ASSERT_TRUE(gateway.StartTask("n1", Start("acme/research", "hub")));
  const StartTaskCommand& sent = inner.starts.back();
  EXPECT_EQ(sent.registry_credential_env, kStoredRegistryCredentialEnv);
  EXPECT_EQ(sent.env.at(kStoredRegistryCredentialEnv), "robot:org-secret");
  EXPECT_EQ(sent.env.at("EPOCHS"), "3");

  // For another registry than the image's: never sent (it would hand the secret to that one).
  ASSERT_TRUE(gateway.StartTask("n1", Start("acme", "elsewhere")));
  EXPECT_TRUE(inner.starts.back().registry_credential_env.empty());
  EXPECT_FALSE(inner.starts.back().env.contains(kStoredRegistryCredentialEnv));

  // Another tenant naming it gets nothing.
  ASSERT_TRUE(gateway.StartTask("n1", Start("globex", "hub")));
  EXPECT_FALSE(inner.starts.back().env.contains(kStoredRegistryCredentialEnv));
}

TEST(CredentialInjectingGatewayTest, EachStartReadsTheCredentialAsItIsThen) {
  MemoryRegistryCredentials store;
  ASSERT_TRUE(store.Put(Cred("acme", "hub", "first"), false).ok());
  RecordingGateway inner;
  CredentialInjectingGateway gateway(&inner, &store);
  gateway.StartTask("n1", Start("acme", "hub"));
  EXPECT_EQ(inner.starts.back().env.at(kStoredRegistryCredentialEnv), "robot:first");
  ASSERT_TRUE(store.Put(Cred("acme", "hub", "rotated"), true).ok());
  gateway.StartTask("n1", Start("acme", "hub"));
  EXPECT_EQ(inner.starts.back().env.at(kStoredRegistryCredentialEnv), "robot:rotated");
  ASSERT_TRUE(store.Delete("acme", "hub").ok());
  gateway.StartTask("n1", Start("acme", "hub"));
  EXPECT_TRUE(inner.starts.back().registry_credential_env.empty());
  EXPECT_FALSE(inner.starts.back().env.contains(kStoredRegistryCredentialEnv));
}

TEST(CredentialInjectingGatewayTest, AJobsOwnSecretEnvCredentialAndPlainStartsPassUnchanged) {
  MemoryRegistryCredentials store;
  ASSERT_TRUE(store.Put(Cred("acme", "pull", "stored"), false).ok());
  RecordingGateway inner;
  CredentialInjectingGateway gateway(&inner, &store);
  StartTaskCommand own = Start("acme", "pull");
  own.env["pull"] = "robot:job-secret";  // the job's own entry of that name wins
  gateway.StartTask("n1", own);
  EXPECT_EQ(inner.starts.back().registry_credential_env, "pull");
  EXPECT_EQ(inner.starts.back().env.at("pull"), "robot:job-secret");
  EXPECT_FALSE(inner.starts.back().env.contains(kStoredRegistryCredentialEnv));
  gateway.StartTask("n1", Start("acme", ""));
  EXPECT_TRUE(inner.starts.back().registry_credential_env.empty());
  EXPECT_EQ(inner.starts.back().env.size(), 1u);
}

}  // namespace
}  // namespace gpupool
