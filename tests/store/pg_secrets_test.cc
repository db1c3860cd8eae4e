// Secrets at rest in PgStore (store/pg_secrets.h): sealed in every column a reader of the
// database sees, opened by Recover, re-sealed on rotation, and a missing key stops Open.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "store/pg_cluster_credentials.h"
#include "store/pg_store.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/test_keyring.h"

namespace gpupool::testing {
namespace {

constexpr char kSecret[] = "s3cr3t-value-do-not-leak";
constexpr char kDigest[] = "fnv1a64:00112233aabbccdd";

PgStoreOptions Pg(const std::string& uri, std::shared_ptr<const SecretKeyring> ring) {
  PgStoreOptions o;
  o.uri = uri;
  o.keyring = std::move(ring);
  return o;
}

JobRecord JobWithSecret(int64_t id) {
  JobRecord j = SampleJob(id, 1);
  j.spec.task_template.secret_env = {{"API_TOKEN", kSecret}, {"EMPTY", ""}};
  j.spec.idempotency_key = "key-" + std::to_string(id);
  j.spec.request_digest = kDigest;
  return j;
}

// Everything a reader of the database sees of the jobs table and the shared credentials.
std::string Dump(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  std::string out;
  for (const auto& r : n.exec("SELECT jobs::text FROM jobs")) out += r[0].c_str();
  for (const auto& r : n.exec("SELECT cluster_credentials::text FROM cluster_credentials")) {
    out += r[0].c_str();
  }
  return out;
}

int64_t CountWhere(const std::string& uri, const std::string& sql) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  return n.exec(sql)[0][0].as<int64_t>();
}

class PgSecretsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(uri_, CreateTestDatabase()); }

  Result<RecoveredState> OpenAndRecover(std::shared_ptr<const SecretKeyring> ring) {
    GPUPOOL_ASSIGN_OR_RETURN(auto store, PgStore::Open(Pg(uri_, std::move(ring))));
    GPUPOOL_RETURN_IF_ERROR(store->AcquireLeadership().status());
    return store->Recover();
  }

  void WriteSecretJob(std::shared_ptr<const SecretKeyring> ring, int64_t id) {
    ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri_, std::move(ring))));
    ASSERT_OK(store->AcquireLeadership().status());
    ASSERT_OK(ApplyAndWait(*store, {InsertJob{JobWithSecret(id)}}));
  }

  std::string uri_;
};

TEST_F(PgSecretsTest, SecretEnvAndItsDigestAreSealedInTheDatabaseAndOpenOnRecover) {
  auto ring = TestKeyring();
  WriteSecretJob(ring, 1);
  const std::string dump = Dump(uri_);
  EXPECT_EQ(dump.find(kSecret), std::string::npos) << dump;
  EXPECT_EQ(dump.find("00112233aabbccdd"), std::string::npos) << dump;
  EXPECT_NE(dump.find("gpsec1." + ring->current_id()), std::string::npos) << dump;

  ASSERT_OK_AND_ASSIGN(RecoveredState state, OpenAndRecover(ring));
  ASSERT_EQ(state.jobs.size(), 1u);
  const JobSpec& spec = state.jobs[0].spec;
  EXPECT_EQ(spec.task_template.secret_env.at("API_TOKEN"), kSecret);
  EXPECT_EQ(spec.task_template.secret_env.at("EMPTY"), "");
  EXPECT_EQ(spec.request_digest, kDigest);
  EXPECT_EQ(spec.task_template.env, JobWithSecret(1).spec.task_template.env);
}

TEST_F(PgSecretsTest, AStoreWithoutAKeyRefusesSecretsAndWritesNothingOfThem) {
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri_, nullptr)));
  ASSERT_OK(store->AcquireLeadership().status());
  Status st = ApplyAndWait(*store, {InsertJob{JobWithSecret(1)}});
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("secrets key"), std::string::npos) << st.ToString();
  // A job without secrets in the same group still commits.
  ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}}));
  EXPECT_EQ(CountWhere(uri_, "SELECT count(*) FROM jobs"), 1);
}

TEST_F(PgSecretsTest, AWrongKeyStopsOpenNamingTheKeyTheDatabaseNeeds) {
  auto ring_a = TestKeyring(kTestSecretsKeyA, "/data/secrets.key");
  WriteSecretJob(ring_a, 1);
  auto ring_b = TestKeyring(kTestSecretsKeyB, "/other/secrets.key");
  Status st = PgStore::Open(Pg(uri_, ring_b)).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find(ring_a->current_id()), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("/other/secrets.key"), std::string::npos) << st.ToString();
  // Nothing was registered for the wrong key: the right one still opens everything.
  ASSERT_OK_AND_ASSIGN(RecoveredState state, OpenAndRecover(ring_a));
  EXPECT_EQ(state.jobs.at(0).spec.task_template.secret_env.at("API_TOKEN"), kSecret);
}

TEST_F(PgSecretsTest, RotationReSealsEverythingUnderTheNewKeyThenTheOldKeyCanGo) {
  auto old_ring = TestKeyring(kTestSecretsKeyA);
  WriteSecretJob(old_ring, 1);
  WriteSecretJob(old_ring, 2);
  auto rotated = TestKeyring(std::string(kTestSecretsKeyB) + "\n" + kTestSecretsKeyA + "\n");
  ASSERT_OK_AND_ASSIGN(RecoveredState state, OpenAndRecover(rotated));
  ASSERT_EQ(state.jobs.size(), 2u);
  EXPECT_EQ(state.jobs[1].spec.task_template.secret_env.at("API_TOKEN"), kSecret);
  const std::string dump = Dump(uri_);
  EXPECT_EQ(dump.find("gpsec1." + old_ring->current_id()), std::string::npos) << dump;
  EXPECT_NE(dump.find("gpsec1." + rotated->current_id()), std::string::npos) << dump;
  EXPECT_EQ(CountWhere(uri_, "SELECT count(*) FROM secret_keys WHERE retired_ms IS NULL"), 1);

  // The new key alone now opens everything; the old one alone is refused.
  auto new_only = TestKeyring(kTestSecretsKeyB);
  ASSERT_OK_AND_ASSIGN(state, OpenAndRecover(new_only));
  EXPECT_EQ(state.jobs[0].spec.task_template.secret_env.at("API_TOKEN"), kSecret);
  EXPECT_EQ(state.jobs[0].spec.request_digest, kDigest);
  EXPECT_EQ(PgStore::Open(Pg(uri_, old_ring)).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(PgSecretsTest, PlaintextFromAnOlderVersionIsReSealedByRecover) {
  {  // the schema, then a row as an older gpupoold wrote it
    ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri_, nullptr)));
    ASSERT_OK(store->AcquireLeadership().status());
    ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(1, 1)}}));
  }
  {
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec(std::string("UPDATE jobs SET secret_env = ARRAY['API_TOKEN', '") + kSecret +
           "'], request_digest = '" + kDigest + "' WHERE id = 1");
    w.exec(
        "INSERT INTO cluster_credentials VALUES (1, 'CERT', '-----BEGIN PRIVATE KEY-----x', "
        "'admintoken0123456789', 0)");
    w.commit();
  }
  auto ring = TestKeyring();
  ASSERT_OK_AND_ASSIGN(RecoveredState state, OpenAndRecover(ring));
  EXPECT_EQ(state.jobs.at(0).spec.task_template.secret_env.at("API_TOKEN"), kSecret);
  const std::string dump = Dump(uri_);
  EXPECT_EQ(dump.find(kSecret), std::string::npos) << dump;
  EXPECT_EQ(dump.find("admintoken0123456789"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("BEGIN PRIVATE KEY"), std::string::npos) << dump;
  // The credentials still read back whole through the store.
  ClusterCredentials mine{"OTHER", "OTHER-KEY", "OTHER-TOKEN"};
  ASSERT_OK_AND_ASSIGN(ClusterCredentials shared, PublishClusterCredentials(uri_, mine, *ring));
  EXPECT_EQ(shared.ca_key_pem, "-----BEGIN PRIVATE KEY-----x");
  EXPECT_EQ(shared.admin_token, "admintoken0123456789");
}

TEST_F(PgSecretsTest, PublishedCredentialsAreSealedAndRefusedUnderAnotherKey) {
  ASSERT_OK(PgStore::Open(Pg(uri_, TestKeyring())).status());  // migrations
  ClusterCredentials mine{"CERT", "-----BEGIN PRIVATE KEY-----secret", "admin-token-abcdef0123"};
  ASSERT_OK_AND_ASSIGN(ClusterCredentials shared,
                       PublishClusterCredentials(uri_, mine, *TestKeyring()));
  EXPECT_EQ(shared, mine);
  const std::string dump = Dump(uri_);
  EXPECT_EQ(dump.find("PRIVATE KEY"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("admin-token-abcdef0123"), std::string::npos) << dump;
  Status st = PublishClusterCredentials(uri_, mine, *TestKeyring(kTestSecretsKeyB)).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
}

TEST_F(PgSecretsTest, AValueMovedToAnotherJobDoesNotOpen) {
  auto ring = TestKeyring();
  WriteSecretJob(ring, 1);
  {
    ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri_, ring)));
    ASSERT_OK(store->AcquireLeadership().status());
    JobRecord other = JobWithSecret(2);
    other.spec.task_template.secret_env = {{"API_TOKEN", "other"}};
    ASSERT_OK(ApplyAndWait(*store, {InsertJob{other}}));
  }
  {  // someone with write access to the database swaps job 1's sealed value into job 2
    pqxx::connection c(uri_);
    pqxx::work w(c);
    w.exec("UPDATE jobs SET secret_env = (SELECT secret_env FROM jobs WHERE id = 1) WHERE id = 2");
    w.commit();
  }
  Status st = OpenAndRecover(ring).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("job 2"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace gpupool::testing
