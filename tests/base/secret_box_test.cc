#include "base/crypto/secret_box.h"

#include <gtest/gtest.h>

#include "tests/support/status_macros.h"

namespace gpupool {
namespace {

// Two fixed keys (32 bytes each, base64), so that ids are stable across runs.
constexpr char kKeyA[] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
constexpr char kKeyB[] = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

SecretKeyring Ring(const std::string& text) {
  Result<SecretKeyring> r = SecretKeyring::Parse(text, "test.key");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(SecretKeyringTest, ASealedValueOpensOnlyForItsContextAndHidesThePlaintext) {
  SecretKeyring ring = Ring(std::string(kKeyA) + "\n");
  ASSERT_OK_AND_ASSIGN(std::string sealed, ring.Seal("hunter2-token", "jobs.secret_env/7/TOKEN"));
  EXPECT_TRUE(SecretKeyring::IsSealed(sealed));
  EXPECT_EQ(SecretKeyring::KeyIdOf(sealed), ring.current_id());
  EXPECT_EQ(sealed.find("hunter2"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(std::string plain, ring.Open(sealed, "jobs.secret_env/7/TOKEN"));
  EXPECT_EQ(plain, "hunter2-token");
  // Moved to another job or name: refused.
  Status moved = ring.Open(sealed, "jobs.secret_env/8/TOKEN").status();
  EXPECT_EQ(moved.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(moved.message().find("does not authenticate"), std::string::npos) << moved.ToString();
}

TEST(SecretKeyringTest, SealingTheSameValueTwiceGivesDifferentText) {
  SecretKeyring ring = Ring(kKeyA);
  ASSERT_OK_AND_ASSIGN(std::string a, ring.Seal("same", "c"));
  ASSERT_OK_AND_ASSIGN(std::string b, ring.Seal("same", "c"));
  EXPECT_NE(a, b);
  ASSERT_OK_AND_ASSIGN(std::string empty, ring.Seal("", "c"));
  ASSERT_OK_AND_ASSIGN(std::string back, ring.Open(empty, "c"));
  EXPECT_EQ(back, "");
}

TEST(SecretKeyringTest, AnAlteredValueDoesNotOpen) {
  SecretKeyring ring = Ring(kKeyA);
  ASSERT_OK_AND_ASSIGN(std::string sealed, ring.Seal("payload", "c"));
  std::string altered = sealed;
  char& c = altered[altered.size() - 6];
  c = c == 'A' ? 'B' : 'A';
  EXPECT_EQ(ring.Open(altered, "c").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ring.Open("gpsec1." + ring.current_id() + ".!!", "c").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ring.Open("plain text", "c").status().code(), StatusCode::kInvalidArgument);
}

TEST(SecretKeyringTest, AfterRotationOldValuesOpenAndNewOnesUseTheFirstKey) {
  SecretKeyring old_ring = Ring(kKeyA);
  ASSERT_OK_AND_ASSIGN(std::string old_value, old_ring.Seal("v", "c"));
  SecretKeyring rotated = Ring(std::string("# rotated\n") + kKeyB + "\n\n" + kKeyA + "\n");
  EXPECT_EQ(rotated.ids().size(), 2u);
  EXPECT_NE(rotated.current_id(), old_ring.current_id());
  ASSERT_OK_AND_ASSIGN(std::string v, rotated.Open(old_value, "c"));
  EXPECT_EQ(v, "v");
  ASSERT_OK_AND_ASSIGN(std::string new_value, rotated.Seal("v", "c"));
  EXPECT_EQ(SecretKeyring::KeyIdOf(new_value), rotated.current_id());
  // The old keyring alone names the key it lacks.
  Status missing = old_ring.Open(new_value, "c").status();
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find(rotated.current_id()), std::string::npos);
  EXPECT_NE(missing.message().find("test.key"), std::string::npos);
}

TEST(SecretKeyringTest, BadKeyTextIsRefusedNamingTheSourceAndLine) {
  for (const std::string& bad :
       {std::string(""), std::string("# only a comment\n"), std::string("# c\nnot-base64!\n"),
        std::string("AAAA\n"), std::string(kKeyA) + "\n" + kKeyA + "\n"}) {
    Result<SecretKeyring> r = SecretKeyring::Parse(bad, "/etc/gpupool/secrets.key");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("/etc/gpupool/secrets.key"), std::string::npos);
  }
  Result<SecretKeyring> r = SecretKeyring::Parse("# c\nAAAA\n", "k");
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().ToString();
}

TEST(SecretKeyringTest, ANewKeyFileParsesToOneKey) {
  ASSERT_OK_AND_ASSIGN(std::string text, SecretKeyring::NewKeyFileText());
  ASSERT_OK_AND_ASSIGN(SecretKeyring ring, SecretKeyring::Parse(text, "new"));
  EXPECT_EQ(ring.ids().size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::string other, SecretKeyring::NewKeyFileText());
  EXPECT_NE(other, text);
}

}  // namespace
}  // namespace gpupool
