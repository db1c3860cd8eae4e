// Test support: RSA/EC key pairs made with OpenSSL and JWTs minted with libjwt, for the OIDC
// bearer token tests (tests/api/oidc_test.cc, tests/e2e/oidc_e2e_test.cc).
#pragma once

#include <jwt.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace gpupool::testing {

struct KeyPair {
  std::string private_pem;
  std::string public_pem;
};

// An RSA key of `rsa_bits`, or an EC P-256 key.
inline KeyPair NewKey(bool rsa, int rsa_bits = 2048) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(rsa ? EVP_PKEY_RSA : EVP_PKEY_EC, nullptr);
  EVP_PKEY_keygen_init(ctx);
  if (rsa) {
    EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, rsa_bits);
  } else {
    EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1);
  }
  EVP_PKEY* key = nullptr;
  EVP_PKEY_keygen(ctx, &key);
  EVP_PKEY_CTX_free(ctx);
  KeyPair out;
  BIO* priv = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(priv, key, nullptr, nullptr, 0, nullptr, nullptr);
  BIO* pub = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(pub, key);
  char* data = nullptr;
  long n = BIO_get_mem_data(priv, &data);
  out.private_pem.assign(data, static_cast<size_t>(n));
  n = BIO_get_mem_data(pub, &data);
  out.public_pem.assign(data, static_cast<size_t>(n));
  BIO_free(priv);
  BIO_free(pub);
  EVP_PKEY_free(key);
  return out;
}

inline const KeyPair& Rsa() {
  static const KeyPair k = NewKey(true);
  return k;
}
inline const KeyPair& OtherRsa() {
  static const KeyPair k = NewKey(true);
  return k;
}
inline const KeyPair& Ec() {
  static const KeyPair k = NewKey(false);
  return k;
}

// What a token says; a field left empty (or at 0) is not in the token.
struct Claims {
  std::string iss = "https://idp.example";
  std::string aud = "gpupool";
  std::string aud_json;  // e.g. ["x","gpupool"], instead of aud
  std::string sub = "alice";
  std::string tenant = "acme/team";
  std::string role = "member";
  int64_t exp = 1'800'000'300;
  int64_t nbf = 0;
};

// `kid`, when not empty, goes into the token's header.
inline std::string Mint(const Claims& c, jwt_alg_t alg, const std::string& key,
                        const std::string& kid = "") {
  jwt_t* jwt = nullptr;
  jwt_new(&jwt);
  if (!kid.empty()) jwt_add_header(jwt, "kid", kid.c_str());
  if (!c.iss.empty()) jwt_add_grant(jwt, "iss", c.iss.c_str());
  if (!c.aud_json.empty()) {
    jwt_add_grants_json(jwt, ("{\"aud\":" + c.aud_json + "}").c_str());
  } else if (!c.aud.empty()) {
    jwt_add_grant(jwt, "aud", c.aud.c_str());
  }
  if (!c.sub.empty()) jwt_add_grant(jwt, "sub", c.sub.c_str());
  if (!c.tenant.empty()) jwt_add_grant(jwt, "gpupool_tenant", c.tenant.c_str());
  if (!c.role.empty()) jwt_add_grant(jwt, "gpupool_role", c.role.c_str());
  if (c.exp != 0) jwt_add_grant_int(jwt, "exp", static_cast<long>(c.exp));
  if (c.nbf != 0) jwt_add_grant_int(jwt, "nbf", static_cast<long>(c.nbf));
  jwt_set_alg(jwt, alg, key.empty() ? nullptr : reinterpret_cast<const unsigned char*>(key.data()),
              static_cast<int>(key.size()));
  char* text = jwt_encode_str(jwt);
  std::string out = text == nullptr ? "" : text;
  free(text);  // NOLINT: allocated by libjwt
  jwt_free(jwt);
  return out;
}

inline std::string Base64Url(const unsigned char* data, size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    acc = (acc << 8) | data[i];
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

// The public half of `pair` as a JWK (RFC 7518 §6.2–6.3) with key id `kid`.
inline std::string JwkOf(const KeyPair& pair, const std::string& kid) {
  BIO* bio = BIO_new_mem_buf(pair.public_pem.data(), static_cast<int>(pair.public_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  std::string out;
  auto bn = [&](const char* name) {
    BIGNUM* v = nullptr;
    EVP_PKEY_get_bn_param(key, name, &v);
    std::string bytes(static_cast<size_t>(BN_num_bytes(v)), '\0');
    BN_bn2bin(v, reinterpret_cast<unsigned char*>(bytes.data()));
    BN_free(v);
    return Base64Url(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  };
  if (EVP_PKEY_base_id(key) == EVP_PKEY_RSA) {
    out = R"({"kty":"RSA","use":"sig","alg":"RS256","kid":")" + kid + R"(","n":")" +
          bn(OSSL_PKEY_PARAM_RSA_N) + R"(","e":")" + bn(OSSL_PKEY_PARAM_RSA_E) + "\"}";
  } else {
    unsigned char point[65];
    size_t len = 0;
    EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &len);
    out = R"({"kty":"EC","crv":"P-256","use":"sig","kid":")" + kid + R"(","x":")" +
          Base64Url(point + 1, 32) + R"(","y":")" + Base64Url(point + 33, 32) + "\"}";
  }
  EVP_PKEY_free(key);
  return out;
}

}  // namespace gpupool::testing
