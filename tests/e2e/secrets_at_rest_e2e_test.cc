// End to end: secrets at rest (docs/security.md). A default gpupoold creates DATA_DIR/secrets.key
// (0600) and keeps it; a tenant's secret env value never reaches PostgreSQL in plaintext and
// survives a restart; a wrong or missing key stops gpupoold at start naming the key, before it
// serves anything.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>

#include "base/crypto/secret_box.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/test_keyring.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;

constexpr char kSecret[] = "tenant-secret-7f3a9c1e5b";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WriteKeyFile(const std::string& dir, const std::string& name, const std::string& key) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << key << "\n";
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path;
}

// Starts a daemon on `data_dir` with `args` that must exit during start-up; returns its log.
std::string StartMustFail(const std::string& data_dir, std::vector<std::string> args) {
  auto d = DaemonProcess::Start({.data_dir = data_dir, .extra_args = std::move(args)});
  EXPECT_FALSE(d.ok()) << "gpupoold served with a wrong secrets key";
  return d.ok() ? std::string() : d.status().message();
}

TEST(SecretsAtRest, TheDefaultKeyIsCreatedOwnerOnlyKeptAndAWrongOneStopsTheDaemon) {
  auto d = DaemonProcess::Start({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::unique_ptr<DaemonProcess> daemon = std::move(d).value();
  const std::string data_dir = daemon->data_dir();
  const std::string key_path = data_dir + "/secrets.key";
  struct stat st {};
  ASSERT_EQ(::stat(key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string key_text = ReadFile(key_path);
  ASSERT_OK_AND_ASSIGN(SecretKeyring ring, SecretKeyring::Parse(key_text, key_path));
  ASSERT_EQ(daemon->Stop(), 0);
  ASSERT_TRUE(daemon->Restart().ok()) << daemon->LogTail(20);
  EXPECT_EQ(ReadFile(key_path), key_text);
  ASSERT_EQ(daemon->Stop(), 0);

  // Another key: refused, naming the key the database needs and where the wrong one came from.
  const std::string other = WriteKeyFile(data_dir, "other.key", testing::kTestSecretsKeyB);
  std::string why = StartMustFail(data_dir, {"--secrets-key-file", other});
  EXPECT_NE(why.find(ring.current_id()), std::string::npos) << why;
  EXPECT_NE(why.find(other), std::string::npos) << why;
  // A key file that is not there, or readable by others: refused naming the file.
  why = StartMustFail(data_dir, {"--secrets-key-file", data_dir + "/missing.key"});
  EXPECT_NE(why.find("missing.key: no secrets key there"), std::string::npos) << why;
  std::filesystem::permissions(other, std::filesystem::perms::group_read,
                               std::filesystem::perm_options::add);
  why = StartMustFail(data_dir, {"--secrets-key-file", other});
  EXPECT_NE(why.find("readable by others"), std::string::npos) << why;
  // The database was not touched by the refused starts: the right key still serves.
  ASSERT_TRUE(daemon->Restart().ok()) << daemon->LogTail(20);
}

TEST(SecretsAtRest, ASecretEnvValueIsSealedInPostgresSurvivesARestartAndARotation) {
  ASSERT_OK_AND_ASSIGN(std::string uri, testing::CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(std::string key_dir, testing::MakeTempDir("gpupool-secrets-e2e"));
  const std::string key_a = WriteKeyFile(key_dir, "a.key", testing::kTestSecretsKeyA);
  auto d = DaemonProcess::Start(
      {.data_dir = "", .extra_args = {"--database", uri, "--secrets-key-file", key_a}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::unique_ptr<DaemonProcess> daemon = std::move(d).value();
  ASSERT_TRUE(daemon->CreatePool("gpu").ok());
  auto jobs = v1::JobService::NewStub(daemon->Channel());
  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  s->set_tenant("acme");
  s->set_pool("gpu");
  s->set_task_count(1);
  s->mutable_template_()->add_command("/bin/true");
  (*s->mutable_template_()->mutable_secret_env())["API_TOKEN"] = kSecret;
  s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
  req.set_idempotency_key("secrets-e2e-1");
  v1::SubmitJobResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status st = jobs->SubmitJob(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  auto dump = [&] {
    pqxx::connection c(uri);
    pqxx::nontransaction n(c);
    std::string out;
    for (const auto& r : n.exec("SELECT jobs::text FROM jobs")) out += r[0].c_str();
    for (const auto& r : n.exec("SELECT events::text FROM events")) out += r[0].c_str();
    for (const auto& r : n.exec("SELECT audit_log::text FROM audit_log")) out += r[0].c_str();
    return out;
  };
  std::string rows = dump();
  EXPECT_EQ(rows.find(kSecret), std::string::npos) << rows;
  EXPECT_NE(rows.find("gpsec1."), std::string::npos) << rows;

  // Restarted, the daemon reads it back: the same submission replays as the same job, which
  // needs the sealed request digest opened.
  ASSERT_EQ(daemon->Stop(), 0);
  ASSERT_TRUE(daemon->Restart().ok()) << daemon->LogTail(20);
  jobs = v1::JobService::NewStub(daemon->Channel());
  v1::SubmitJobResponse again;
  grpc::ClientContext ctx;
  grpc::Status st = jobs->SubmitJob(&ctx, req, &again);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(again.job_id(), resp.job_id());
  EXPECT_EQ(ReadFile(daemon->log_path()).find(kSecret), std::string::npos);
  EXPECT_EQ(dump().find(kSecret), std::string::npos);

  // Rotation: a new key first, the old one after it. The restarted leader re-seals everything
  // under the new key, says so in the audit log, and from then on the new key alone serves.
  ASSERT_EQ(daemon->Stop(), 0);
  const std::string rotated =
      WriteKeyFile(key_dir, "rotated.key",
                   std::string(testing::kTestSecretsKeyB) + "\n" + testing::kTestSecretsKeyA);
  const std::string old_id = testing::TestKeyring(testing::kTestSecretsKeyA)->current_id();
  const std::string new_id = testing::TestKeyring(testing::kTestSecretsKeyB)->current_id();
  auto restart_with = [&](const std::string& key_file) {
    auto r = DaemonProcess::Start(
        {.data_dir = "", .extra_args = {"--database", uri, "--secrets-key-file", key_file}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  };
  daemon.reset();
  daemon = restart_with(rotated);
  ASSERT_NE(daemon, nullptr);
  rows = dump();
  EXPECT_EQ(rows.find("gpsec1." + old_id), std::string::npos) << rows;
  EXPECT_NE(rows.find("gpsec1." + new_id), std::string::npos) << rows;
  EXPECT_NE(rows.find("ResealSecrets"), std::string::npos) << rows;
  ASSERT_EQ(daemon->Stop(), 0);
  daemon.reset();
  daemon = restart_with(WriteKeyFile(key_dir, "b.key", testing::kTestSecretsKeyB));
  ASSERT_NE(daemon, nullptr);
  jobs = v1::JobService::NewStub(daemon->Channel());
  grpc::ClientContext ctx2;
  v1::SubmitJobResponse third;
  st = jobs->SubmitJob(&ctx2, req, &third);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(third.job_id(), resp.job_id());
  std::filesystem::remove_all(key_dir);
}

}  // namespace
}  // namespace gpupool
