// gpupoold's secrets key (cmd/daemon/secrets_key.h): the `secrets:` section, the default key file
// created owner-only and kept, a key command run as a real child process, and each way of not
// having a key refused with a message that names it.
#include "cmd/daemon/secrets_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/status_macros.h"
#include "tests/support/test_keyring.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

class SecretsKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpupool-secrets-key-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_.data_dir = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
    return path;
  }
  std::string Error(const DaemonConfig& c) {
    Result<std::shared_ptr<const SecretKeyring>> r = LoadSecretsKey(c);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
    return r.status().message();
  }

  fs::path dir_;
  DaemonConfig config_;
};

TEST_F(SecretsKeyTest, TheDefaultKeyFileIsCreatedOwnerOnlyOnceAndKept) {
  ASSERT_OK_AND_ASSIGN(auto first, LoadSecretsKey(config_));
  const std::string path = (dir_ / "secrets.key").string();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_OK_AND_ASSIGN(auto second, LoadSecretsKey(config_));
  EXPECT_EQ(first->current_id(), second->current_id());
  EXPECT_EQ(second->source(), path);
}

TEST_F(SecretsKeyTest, AKeyFileMustExistBeOwnerOnlyAndHoldAKey) {
  config_.secrets.key_file = (dir_ / "absent.key").string();
  EXPECT_NE(Error(config_).find("absent.key: no secrets key there"), std::string::npos);
  config_.secrets.key_file = Write("bad.key", "not a key\n");
  EXPECT_NE(Error(config_).find("bad.key: line 1: not a secrets key"), std::string::npos);
  config_.secrets.key_file = Write("open.key", std::string(testing::kTestSecretsKeyA) + "\n");
  fs::permissions(config_.secrets.key_file, fs::perms::others_read, fs::perm_options::add);
  EXPECT_NE(Error(config_).find("readable by others than its owner"), std::string::npos);
  fs::permissions(config_.secrets.key_file, fs::perms::others_read, fs::perm_options::remove);
  ASSERT_OK_AND_ASSIGN(auto ring, LoadSecretsKey(config_));
  EXPECT_EQ(ring->current_id(), testing::TestKeyring()->current_id());
  EXPECT_FALSE(fs::exists(dir_ / "secrets.key"));  // a configured key never creates the default
}

TEST_F(SecretsKeyTest, AKeyCommandsOutputIsTheKeyringAndItsFailuresAreNamed) {
  config_.secrets.key_command = {"/bin/sh", "-c",
                                 std::string("printf '%s\\n%s\\n' ") + testing::kTestSecretsKeyB +
                                     " " + testing::kTestSecretsKeyA};
  ASSERT_OK_AND_ASSIGN(auto ring, LoadSecretsKey(config_));
  EXPECT_EQ(ring->ids().size(), 2u);
  EXPECT_EQ(ring->current_id(), testing::TestKeyring(testing::kTestSecretsKeyB)->current_id());

  config_.secrets.key_command = {"/bin/sh", "-c", "echo vault sealed >&2; exit 3"};
  std::string why = Error(config_);
  EXPECT_NE(why.find("secrets.key_command (/bin/sh)"), std::string::npos) << why;
  EXPECT_NE(why.find("vault sealed"), std::string::npos) << why;
  config_.secrets.key_command = {"/bin/sleep", "5"};
  config_.secrets.key_command_timeout_ms = 200;
  why = Error(config_);
  EXPECT_NE(why.find("no answer within 200 ms"), std::string::npos) << why;
  config_.secrets.key_command = {"/bin/true"};
  why = Error(config_);
  EXPECT_NE(why.find("holds no secrets key"), std::string::npos) << why;
  config_.secrets.key_command = {"/no/such/kms-get"};
  why = Error(config_);
  EXPECT_NE(why.find("/no/such/kms-get"), std::string::npos) << why;
}

TEST(SecretsConfigTest, TheSectionNamesAFileOrACommandNeverBoth) {
  ASSERT_OK_AND_ASSIGN(DaemonConfig none, ParseDaemonConfig("", "gpupoold.yaml"));
  EXPECT_TRUE(none.secrets.key_file.empty());
  EXPECT_TRUE(none.secrets.key_command.empty());
  ASSERT_OK_AND_ASSIGN(
      DaemonConfig c,
      ParseDaemonConfig("secrets:\n  key_command: [/usr/local/bin/kms-get, gpupool]\n"
                        "  key_command_timeout_ms: 5000\n",
                        "gpupoold.yaml"));
  EXPECT_EQ(c.secrets.key_command, (std::vector<std::string>{"/usr/local/bin/kms-get", "gpupool"}));
  EXPECT_EQ(c.secrets.key_command_timeout_ms, 5000);
  struct Case {
    const char* yaml;
    const char* error;
  };
  for (const Case& k : std::vector<Case>{
           {"secrets:\n  key_file: secrets.key\n",
            "secrets.key_file: must be an absolute path, got 'secrets.key'"},
           {"secrets:\n  key_command: [kms-get]\n",
            "secrets.key_command: must start with the absolute path"},
           {"secrets:\n  key_file: /k\n  key_command: [/bin/kms]\n",
            "set key_file or key_command, not both"},
           {"secrets:\n  key: /k\n", "secrets.key"},
       }) {
    Result<DaemonConfig> r = ParseDaemonConfig(k.yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << k.yaml;
    EXPECT_NE(r.status().message().find(k.error), std::string::npos) << r.status().ToString();
  }
  const char* argv[] = {"gpupoold", "--secrets-key-file", "relative.key"};
  EXPECT_FALSE(ParseDaemonCommandLine(3, argv).ok());
  const char* ok_argv[] = {"gpupoold", "--secrets-key-file", "/etc/gpupool/secrets.key"};
  ASSERT_OK_AND_ASSIGN(CommandLine cl, ParseDaemonCommandLine(3, ok_argv));
  EXPECT_EQ(cl.config.secrets.key_file, "/etc/gpupool/secrets.key");
}

}  // namespace
}  // namespace gpupool
