// SecretKeyring: seals secrets for storage (AES-256-GCM) with keys kept outside the database.
//
// gpupoold keeps tenants' secret env values and the replicas' shared CA key and admin credential
// in PostgreSQL (docs/security.md, "Secrets at rest"). Each is sealed before it is written:
//
//   gpsec1.<key id>.<base64(nonce ‖ ciphertext ‖ tag)>
//
// with a fresh 96-bit nonce per value and, as additional authenticated data, a context string
// that names where the value lives ("jobs.secret_env/42/TOKEN"): a sealed value copied to another
// job or field does not open there. The key id is a fingerprint of the key (the first 16 hex
// digits of SHA-256 over a label and the key), so a value names the key that opens it and a
// database can say which keys it needs without holding any of them.
//
// Keyring text (a key file, or what a key command prints): one key per line, 32 bytes in base64
// (`openssl rand -base64 32`); blank lines and lines starting with '#' are ignored. The first key
// seals; every key opens. Rotation: put a new key first, restart (the leader re-seals every value
// under it, docs/security.md), then drop the old line.
//
// Thread safety: a SecretKeyring is immutable after Parse; every method may be called from any
// thread.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool {

class SecretKeyring {
 public:
  static constexpr std::string_view kPrefix = "gpsec1.";

  // Parses keyring text; errors name `source` (the file or command) and the line.
  static Result<SecretKeyring> Parse(std::string_view text, const std::string& source);
  // Text for a new key file holding one fresh random key.
  static Result<std::string> NewKeyFileText();

  SecretKeyring(const SecretKeyring&) = default;
  SecretKeyring& operator=(const SecretKeyring&) = default;
  ~SecretKeyring();

  // The key that seals, and every key in order (the first is current_id()).
  const std::string& current_id() const { return keys_.front().id; }
  std::vector<std::string> ids() const;
  bool Has(std::string_view id) const;
  // Where the keys came from ("/var/lib/gpupool/secrets.key"), for messages.
  const std::string& source() const { return source_; }

  // Seals `plaintext` under the current key, bound to `context`. INTERNAL only when the system's
  // random generator or the cipher fails.
  Result<std::string> Seal(std::string_view plaintext, std::string_view context) const;
  // The plaintext of a sealed value. FAILED_PRECONDITION naming the key id when this keyring lacks
  // its key, or when it does not authenticate (altered, or sealed for another context);
  // INVALID_ARGUMENT when `sealed` is not a well-formed sealed value.
  Result<std::string> Open(std::string_view sealed, std::string_view context) const;

  static bool IsSealed(std::string_view value) { return value.starts_with(kPrefix); }
  // The key id a sealed value names; empty when `value` is not sealed.
  static std::string_view KeyIdOf(std::string_view value);

 private:
  struct Key {
    std::string id;
    std::array<unsigned char, 32> bytes{};
  };
  SecretKeyring() = default;
  const Key* Find(std::string_view id) const;

  std::vector<Key> keys_;
  std::string source_;
};

}  // namespace gpupool
