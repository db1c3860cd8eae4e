#include "api/webhooks/signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdlib>
#include <vector>

namespace gpupool::webhooks {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string HmacSha256Hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return Hex(mac, len);
}

std::string Sign(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  const std::string t = std::to_string(unix_seconds);
  std::string signed_text = t + ".";
  signed_text.append(body);
  return "t=" + t + ",v1=" + HmacSha256Hex(secret, signed_text);
}

Status Verify(std::string_view secret, std::string_view header, std::string_view body,
              int64_t now_seconds, int64_t tolerance_seconds) {
  std::string_view t;
  std::vector<std::string_view> v1;
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    if (item.starts_with("t=")) t = item.substr(2);
    if (item.starts_with("v1=")) v1.push_back(item.substr(3));
  }
  int64_t when = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), when);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
    return Status::Unauthenticated("webhook signature: no t=<unix seconds>");
  }
  if (v1.empty()) return Status::Unauthenticated("webhook signature: no v1=<hex>");
  if (std::llabs(now_seconds - when) > tolerance_seconds) {
    return Status::Unauthenticated("webhook signature: signed at " + std::to_string(when) +
                                   ", more than " + std::to_string(tolerance_seconds) +
                                   " s from now");
  }
  std::string signed_text(t);
  signed_text += ".";
  signed_text.append(body);
  const std::string want = HmacSha256Hex(secret, signed_text);
  for (std::string_view got : v1) {
    if (got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0) {
      return Status::Ok();
    }
  }
  return Status::Unauthenticated("webhook signature: no v1 matches the body");
}

Result<std::string> NewSecret() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1) {
    return Status::Internal("webhook secret: the random number generator failed");
  }
  return "whsec_" + Hex(buf, sizeof buf);
}

}  // namespace gpupool::webhooks
