// The RegistryCredentialStore conformance suite (scheduler/registry_credentials.h), against the
// memory implementation and PostgreSQL: rows round-trip with their secret; a name is unique per
// tenant unless replacing, and a replacement keeps its creator; lists are per subtree and never
// carry a secret; deletion of an unknown name is NOT_FOUND. Then PostgreSQL alone: the secret is
// sealed in every column a reader of the database sees, bound to its tenant and name, re-sealed
// when the secrets key rotates, and refused without a key.
#include <gtest/gtest.h>

#include <functional>
#include <pqxx/pqxx>

#include "store/memory_registry_credentials.h"
#include "store/pg_registry_credentials.h"
#include "store/pg_store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/test_keyring.h"

namespace gpupool::testing {
namespace {

constexpr char kSecret[] = "robot-token-do-not-leak";

RegistryCredentialRecord Cred(const std::string& tenant, const std::string& name,
                              const std::string& secret = kSecret) {
  RegistryCredentialRecord c;
  c.tenant = tenant;
  c.name = name;
  c.registry = "registry.acme.example";
  c.username = "robot";
  c.password = secret;
  c.created_by = "key:0123456789ab";
  c.create_ms = c.update_ms = 1'000;
  return c;
}

// A fresh, migrated database.
Result<std::string> NewDatabase() {
  GPUPOOL_ASSIGN_OR_RETURN(std::string uri, CreateTestDatabase());
  PgStoreOptions o;
  o.uri = uri;
  GPUPOOL_RETURN_IF_ERROR(PgStore::Open(o).status());
  return uri;
}

struct Factory {
  std::string name;
  std::function<Result<std::unique_ptr<RegistryCredentialStore>>()> make;
  friend void PrintTo(const Factory& f, std::ostream* os) { *os << f.name; }
};

class RegistryCredentialConformanceTest : public ::testing::TestWithParam<Factory> {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(store_, GetParam().make()); }
  RegistryCredentialRecord Row(const std::string& tenant, const std::string& name) {
    Result<std::optional<RegistryCredentialRecord>> r = store_->Get(tenant, name);
    EXPECT_OK(r.status());
    return r.ok() && r->has_value() ? **r : RegistryCredentialRecord{};
  }
  std::unique_ptr<RegistryCredentialStore> store_;
};

TEST_P(RegistryCredentialConformanceTest, RowsRoundTripAndANameIsUniquePerTenant) {
  ASSERT_OK(store_->Put(Cred("acme", "hub"), false));
  const RegistryCredentialRecord got = Row("acme", "hub");
  EXPECT_EQ(got.registry, "registry.acme.example");
  EXPECT_EQ(got.username, "robot");
  EXPECT_EQ(got.password, kSecret);
  EXPECT_EQ(got.created_by, "key:0123456789ab");
  EXPECT_EQ(store_->Put(Cred("acme", "hub", "other"), false).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Row("acme", "hub").password, kSecret);       // the refused one changed nothing
  ASSERT_OK(store_->Put(Cred("globex", "hub"), false));  // another tenant, the same name

  ASSERT_OK_AND_ASSIGN(std::optional<RegistryCredentialRecord> none, store_->Get("acme", "nope"));
  EXPECT_FALSE(none.has_value());
}

TEST_P(RegistryCredentialConformanceTest, AReplacementRotatesTheSecretAndKeepsItsCreator) {
  ASSERT_OK(store_->Put(Cred("acme", "hub"), false));
  RegistryCredentialRecord next = Cred("acme", "hub", "rotated-secret");
  next.username = "robot2";
  next.created_by = "key:ffffffffffff";
  next.create_ms = next.update_ms = 5'000;
  ASSERT_OK(store_->Put(next, true));
  const RegistryCredentialRecord got = Row("acme", "hub");
  EXPECT_EQ(got.password, "rotated-secret");
  EXPECT_EQ(got.username, "robot2");
  EXPECT_EQ(got.created_by, "key:0123456789ab");
  EXPECT_EQ(got.create_ms, 1'000);
  EXPECT_EQ(got.update_ms, 5'000);
}

TEST_P(RegistryCredentialConformanceTest, ListsAreBySubtreeAndCarryNoSecret) {
  for (const char* t : {"acme", "acme/research", "acme2", "globex"}) {
    ASSERT_OK(store_->Put(Cred(t, "hub"), false));
  }
  ASSERT_OK(store_->Put(Cred("acme", "a-first"), false));
  ASSERT_OK_AND_ASSIGN(std::vector<RegistryCredentialRecord> acme, store_->List("acme"));
  std::vector<std::string> seen;
  for (const RegistryCredentialRecord& c : acme) {
    seen.push_back(c.tenant + ":" + c.name);
    EXPECT_TRUE(c.password.empty()) << c.tenant << "/" << c.name;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"acme:a-first", "acme:hub", "acme/research:hub"}));
  ASSERT_OK_AND_ASSIGN(std::vector<RegistryCredentialRecord> all, store_->List(""));
  EXPECT_EQ(all.size(), 5u);
}

TEST_P(RegistryCredentialConformanceTest, DeleteRemovesOnlyThatOneAndAnUnknownIsNotFound) {
  ASSERT_OK(store_->Put(Cred("acme", "hub"), false));
  ASSERT_OK(store_->Put(Cred("acme/research", "hub"), false));
  ASSERT_OK(store_->Delete("acme", "hub"));
  EXPECT_EQ(store_->Delete("acme", "hub").code(), StatusCode::kNotFound);
  EXPECT_EQ(Row("acme/research", "hub").password, kSecret);
}

TEST_P(RegistryCredentialConformanceTest, MalformedRecordsAreRefusedWithoutTheSecret) {
  RegistryCredentialRecord bad = Cred("acme", "Hub");
  Status st = store_->Put(bad, false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'Hub'"), std::string::npos) << st.message();
  bad = Cred("acme", "hub", "");
  EXPECT_EQ(store_->Put(bad, false).code(), StatusCode::kInvalidArgument);
  bad = Cred("acme", "hub", std::string(kSecret) + '\0');
  st = store_->Put(bad, false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().find(kSecret), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(
    All, RegistryCredentialConformanceTest,
    ::testing::Values(Factory{"memory",
                              []() -> Result<std::unique_ptr<RegistryCredentialStore>> {
                                return std::unique_ptr<RegistryCredentialStore>(
                                    std::make_unique<MemoryRegistryCredentials>());
                              }},
                      Factory{"pg",
                              []() -> Result<std::unique_ptr<RegistryCredentialStore>> {
                                GPUPOOL_ASSIGN_OR_RETURN(std::string uri, NewDatabase());
                                GPUPOOL_ASSIGN_OR_RETURN(
                                    auto s, PgRegistryCredentials::Open(uri, TestKeyring()));
                                return std::unique_ptr<RegistryCredentialStore>(std::move(s));
                              }}),
    [](const ::testing::TestParamInfo<Factory>& i) { return i.param.name; });

std::string DumpCredentials(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  std::string out;
  for (const auto& r : n.exec("SELECT registry_credentials::text FROM registry_credentials")) {
    out += r[0].c_str();
  }
  return out;
}

TEST(PgRegistryCredentialsTest, TheSecretIsSealedAtRestAndBoundToItsTenantAndName) {
  ASSERT_OK_AND_ASSIGN(std::string uri, NewDatabase());
  auto ring = TestKeyring();
  ASSERT_OK_AND_ASSIGN(auto store, PgRegistryCredentials::Open(uri, ring));
  ASSERT_OK(store->Put(Cred("acme", "hub"), false));
  ASSERT_OK(store->Put(Cred("globex", "hub", "globex-secret"), false));
  const std::string dump = DumpCredentials(uri);
  EXPECT_EQ(dump.find(kSecret), std::string::npos) << dump;
  EXPECT_NE(dump.find("gpsec1." + ring->current_id()), std::string::npos) << dump;

  // A reader with the database swapping one tenant's sealed value into another's row gets an
  // error, not the other tenant's secret.
  {
    pqxx::connection c(uri);
    pqxx::work w(c);
    w.exec(
        "UPDATE registry_credentials SET password = (SELECT password FROM registry_credentials "
        "WHERE tenant = 'acme') WHERE tenant = 'globex'");
    w.commit();
  }
  Result<std::optional<RegistryCredentialRecord>> swapped = store->Get("globex", "hub");
  EXPECT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().message().find(kSecret), std::string::npos);

  // A daemon without a secrets key stores no credential in clear.
  ASSERT_OK_AND_ASSIGN(auto keyless, PgRegistryCredentials::Open(uri, nullptr));
  EXPECT_EQ(keyless->Put(Cred("acme", "other"), false).code(), StatusCode::kFailedPrecondition);
}

TEST(PgRegistryCredentialsTest, KeyRotationReSealsThemUnderTheNewKey) {
  ASSERT_OK_AND_ASSIGN(std::string uri, NewDatabase());
  auto old_ring = TestKeyring(kTestSecretsKeyA);
  {
    PgStoreOptions o;
    o.uri = uri;
    o.keyring = old_ring;
    ASSERT_OK(PgStore::Open(o).status());  // registers the old key as in use
    ASSERT_OK_AND_ASSIGN(auto store, PgRegistryCredentials::Open(uri, old_ring));
    ASSERT_OK(store->Put(Cred("acme", "hub"), false));
  }
  auto rotated = TestKeyring(std::string(kTestSecretsKeyB) + "\n" + kTestSecretsKeyA + "\n");
  PgStoreOptions o;
  o.uri = uri;
  o.keyring = rotated;
  ASSERT_OK_AND_ASSIGN(auto pg, PgStore::Open(o));
  ASSERT_OK(pg->AcquireLeadership().status());
  ASSERT_OK(pg->Recover().status());
  EXPECT_EQ(pg->last_reseal().registry_credentials, 1);
  const std::string dump = DumpCredentials(uri);
  EXPECT_EQ(dump.find("gpsec1." + old_ring->current_id()), std::string::npos) << dump;

  // The new key alone opens it.
  ASSERT_OK_AND_ASSIGN(auto store, PgRegistryCredentials::Open(uri, TestKeyring(kTestSecretsKeyB)));
  ASSERT_OK_AND_ASSIGN(std::optional<RegistryCredentialRecord> got, store->Get("acme", "hub"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->password, kSecret);
}

}  // namespace
}  // namespace gpupool::testing
