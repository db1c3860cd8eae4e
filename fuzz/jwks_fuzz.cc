// libFuzzer target: the identity provider's published metadata (api/jwks.h), which gpupoold
// fetches over the network. The first byte picks the parser: a JWK Set, a discovery document, or
// a token's header. Whatever the bytes: no crash, and every key a JWK Set yields is a public key
// OpenSSL reads back, of the type it claims (RSA of 2048 bits or more, EC on P-256), under a kid
// no other key of the set has; a discovery document is taken only when it names the expected
// issuer and its three endpoints.
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "api/jwks.h"

namespace {

void CheckKey(const gpupool::api::Jwk& k) {
  BIO* bio = BIO_new_mem_buf(k.pem.data(), static_cast<int>(k.pem.size()));
  EVP_PKEY* key = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) __builtin_trap();  // a key OpenSSL cannot read back
  const int type = EVP_PKEY_base_id(key);
  const int bits = EVP_PKEY_bits(key);
  EVP_PKEY_free(key);
  if (k.kty == "RSA" && (type != EVP_PKEY_RSA || bits < 2048)) __builtin_trap();
  if (k.kty == "EC" && (type != EVP_PKEY_EC || bits != 256)) __builtin_trap();
  if (k.kty != "RSA" && k.kty != "EC") __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto keys = gpupool::api::ParseJwks(text);
      if (!keys.ok()) return 0;
      if (keys->empty()) __builtin_trap();  // "no key" is an error, never an empty set
      std::set<std::string> kids;
      for (const gpupool::api::Jwk& k : *keys) {
        CheckKey(k);
        if (!kids.insert(k.kid).second) __builtin_trap();
      }
      return 0;
    }
    case 1: {
      const std::string issuer = "https://idp.example";
      auto d = gpupool::api::ParseOidcDiscovery(text, issuer);
      if (!d.ok()) return 0;
      if (d->issuer != issuer || d->authorization_endpoint.empty() || d->token_endpoint.empty() ||
          d->jwks_uri.empty()) {
        __builtin_trap();
      }
      return 0;
    }
    default:
      (void)gpupool::api::PeekJwsHeader(text);
      return 0;
  }
}
