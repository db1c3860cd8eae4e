// Fixed secrets keyrings for tests (base/crypto/secret_box.h): stable key ids across runs, and a
// second key for rotation and wrong-key cases.
#pragma once

#include <memory>
#include <string>

#include "base/crypto/secret_box.h"

namespace gpupool::testing {

inline constexpr char kTestSecretsKeyA[] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
inline constexpr char kTestSecretsKeyB[] = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

// A keyring of the given key file text (aborts on bad text: a test's own constant).
inline std::shared_ptr<const SecretKeyring> TestKeyring(const std::string& text = kTestSecretsKeyA,
                                                        const std::string& source = "test.key") {
  Result<SecretKeyring> ring = SecretKeyring::Parse(text, source);
  if (!ring.ok()) std::abort();
  return std::make_shared<const SecretKeyring>(*std::move(ring));
}

}  // namespace gpupool::testing
