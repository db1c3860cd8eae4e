#include "base/crypto/secret_box.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace gpupool {
namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kIdHexDigits = 16;
constexpr std::string_view kIdLabel = "gpupool secrets key id v1\n";

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

std::string Base64(const unsigned char* p, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
  out.resize(static_cast<size_t>(len));
  return out;
}

// Strict base64 (with padding): nullopt-like empty result and false on anything else.
bool Unbase64(std::string_view text, std::string* out) {
  if (text.empty() || text.size() % 4 != 0) return false;
  for (char c : text) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/' || c == '=';
    if (!ok) return false;
  }
  std::string buf(3 * text.size() / 4, '\0');
  const int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(buf.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
  if (len < 0) return false;
  size_t pad = 0;
  if (text.ends_with("==")) {
    pad = 2;
  } else if (text.ends_with("=")) {
    pad = 1;
  }
  buf.resize(static_cast<size_t>(len) - pad);  // EVP_DecodeBlock counts padding as zero bytes
  *out = std::move(buf);
  return true;
}

std::string KeyId(const std::array<unsigned char, 32>& key) {
  std::string data(kIdLabel);
  data.append(reinterpret_cast<const char*>(key.data()), key.size());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  OPENSSL_cleanse(data.data(), data.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (size_t i = 0; i < kIdHexDigits / 2; ++i) {
    id.push_back(kHex[md[i] >> 4]);
    id.push_back(kHex[md[i] & 0xf]);
  }
  return id;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

SecretKeyring::~SecretKeyring() {
  for (Key& k : keys_) OPENSSL_cleanse(k.bytes.data(), k.bytes.size());
}

Result<SecretKeyring> SecretKeyring::Parse(std::string_view text, const std::string& source) {
  SecretKeyring ring;
  ring.source_ = source;
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = source + ": line " + std::to_string(line_no);
    std::string raw;
    if (!Unbase64(line, &raw) || raw.size() != 32) {
      OPENSSL_cleanse(raw.data(), raw.size());
      return Status::InvalidArgument(
          where + ": not a secrets key (32 bytes in base64, as `openssl rand -base64 32` prints)");
    }
    Key key;
    std::copy(raw.begin(), raw.end(), key.bytes.begin());
    OPENSSL_cleanse(raw.data(), raw.size());
    key.id = KeyId(key.bytes);
    if (ring.Find(key.id) != nullptr) {
      return Status::InvalidArgument(where + ": key " + key.id + " is listed twice");
    }
    ring.keys_.push_back(std::move(key));
  }
  if (ring.keys_.empty()) {
    return Status::InvalidArgument(source +
                                   ": holds no secrets key (one line of 32 bytes in base64, as "
                                   "`openssl rand -base64 32` prints)");
  }
  return ring;
}

Result<std::string> SecretKeyring::NewKeyFileText() {
  std::array<unsigned char, 32> key{};
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    return Status::Internal("the system's random number generator failed");
  }
  std::string text =
      "# gpupoold's secrets key (docs/security.md, \"Secrets at rest\"). Without it the secrets\n"
      "# in the database cannot be read: back it up apart from the database. The first key\n"
      "# seals, every key opens; to rotate, put a new key (openssl rand -base64 32) first.\n" +
      Base64(key.data(), key.size()) + "\n";
  OPENSSL_cleanse(key.data(), key.size());
  return text;
}

std::vector<std::string> SecretKeyring::ids() const {
  std::vector<std::string> out;
  for (const Key& k : keys_) out.push_back(k.id);
  return out;
}

bool SecretKeyring::Has(std::string_view id) const { return Find(id) != nullptr; }

const SecretKeyring::Key* SecretKeyring::Find(std::string_view id) const {
  for (const Key& k : keys_) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

std::string_view SecretKeyring::KeyIdOf(std::string_view value) {
  if (!IsSealed(value)) return {};
  value.remove_prefix(kPrefix.size());
  const size_t dot = value.find('.');
  return dot == std::string_view::npos ? std::string_view() : value.substr(0, dot);
}

Result<std::string> SecretKeyring::Seal(std::string_view plaintext,
                                        std::string_view context) const {
  const Key& key = keys_.front();
  std::string box(kNonceBytes + plaintext.size() + kTagBytes, '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(box.data());
  if (RAND_bytes(nonce, static_cast<int>(kNonceBytes)) != 1) {
    return Status::Internal("the system's random number generator failed");
  }
  CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int len = 0;
  auto* ct = nonce + kNonceBytes;
  bool ok =
      ctx != nullptr &&
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.bytes.data(), nonce) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(context.data()),
                        static_cast<int>(context.size())) == 1 &&
      EVP_EncryptUpdate(ctx.get(), ct, &len,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), ct + len, &len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                          ct + plaintext.size()) == 1;
  if (!ok) return Status::Internal("sealing a secret failed (AES-256-GCM)");
  std::string out(kPrefix);
  out += key.id;
  out += '.';
  out += Base64(reinterpret_cast<const unsigned char*>(box.data()), box.size());
  return out;
}

Result<std::string> SecretKeyring::Open(std::string_view sealed, std::string_view context) const {
  const std::string_view id = KeyIdOf(sealed);
  if (id.size() != kIdHexDigits) {
    return Status::InvalidArgument("not a sealed secret (expected gpsec1.<key id>.<data>)");
  }
  const Key* key = Find(id);
  if (key == nullptr) {
    return Status::FailedPrecondition("a secret is sealed with key " + std::string(id) +
                                      ", which " + source_ + " does not hold");
  }
  std::string box;
  if (!Unbase64(sealed.substr(kPrefix.size() + id.size() + 1), &box) ||
      box.size() < kNonceBytes + kTagBytes) {
    return Status::InvalidArgument("not a sealed secret (its data is not base64 of a sealed box)");
  }
  const size_t n = box.size() - kNonceBytes - kTagBytes;
  auto* nonce = reinterpret_cast<unsigned char*>(box.data());
  auto* ct = nonce + kNonceBytes;
  std::string plain(n, '\0');
  auto* pt = reinterpret_cast<unsigned char*>(plain.data());
  CipherCtx ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int len = 0;
  const bool ok =
      ctx != nullptr &&
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key->bytes.data(), nonce) == 1 &&
      EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(context.data()),
                        static_cast<int>(context.size())) == 1 &&
      EVP_DecryptUpdate(ctx.get(), pt, &len, ct, static_cast<int>(n)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), ct + n) ==
          1 &&
      EVP_DecryptFinal_ex(ctx.get(), pt + len, &len) == 1;
  if (!ok) {
    OPENSSL_cleanse(plain.data(), plain.size());
    return Status::FailedPrecondition("a secret sealed with key " + std::string(id) +
                                      " does not authenticate for " + std::string(context) +
                                      ": it was altered, or moved from another record");
  }
  return plain;
}

}  // namespace gpupool
