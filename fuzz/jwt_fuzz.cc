// libFuzzer target: JWT bearer tokens (api/oidc.h) through the Authenticator. The verifier trusts
// an RSA key made at start whose private half is thrown away, so no input can carry a valid
// signature: any token accepted is a forgery (alg none, HMAC keyed with the public key, a parser
// slip) and traps. Every refusal must be exactly "invalid bearer token".
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/auth.h"
#include "api/oidc.h"

namespace {

std::string PublicKeyPem() {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nullptr);
  EVP_PKEY_keygen_init(ctx);
  EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048);
  EVP_PKEY* key = nullptr;
  EVP_PKEY_keygen(ctx, &key);
  EVP_PKEY_CTX_free(ctx);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, key);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  EVP_PKEY_free(key);
  return pem;
}

const gpupool::api::Authenticator* MakeAuthenticator() {
  gpupool::api::OidcOptions o;
  o.issuer = "https://idp.example";
  o.audience = "gpupool";
  o.public_key_pem = PublicKeyPem();
  auto verifier = gpupool::api::OidcVerifier::Create(o, [] { return int64_t{1'800'000'000}; });
  if (!verifier.ok()) __builtin_trap();
  std::shared_ptr<const gpupool::api::OidcVerifier> v = *verifier;
  return new gpupool::api::Authenticator(
      gpupool::api::Authenticator::Create({{"admin-token-0123456789", "ops", true}}, nullptr,
                                          [v](std::string_view t) { return v->Verify(t); })
          .value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpupool::api::Authenticator* auth = MakeAuthenticator();
  const std::string header = "Bearer " + std::string(reinterpret_cast<const char*>(data), size);
  auto caller = auth->Authenticate(header);
  if (caller.ok()) {
    if (caller->key_id.rfind("oidc:", 0) == 0) __builtin_trap();  // a forged token got in
    return 0;                                                     // the bootstrap token itself
  }
  if (caller.status().code() != gpupool::StatusCode::kUnauthenticated) __builtin_trap();
  static constexpr std::string_view kFixed[] = {
      "missing credentials: send the header 'Authorization: Bearer <token>'",
      "unsupported authorization scheme: expected 'Authorization: Bearer <token>'",
      "invalid bearer token",
  };
  for (std::string_view m : kFixed) {
    if (caller.status().message() == m) return 0;
  }
  __builtin_trap();
}
