// OidcVerifier: JWT bearer tokens from an external OIDC issuer (`auth.oidc`, docs/security.md,
// "OIDC bearer tokens"), turned into a CallContext. The signature is checked by libjwt (Debian's
// libjwt, OpenSSL flavour) against the issuer's public key: the one given in the config, or the
// one of the token's key id ("kid") among those the issuer publishes (api/jwks_cache.h). The
// claims by this class:
//  * alg      — one of the configured algorithms (RS256, ES256), and the one the key is for;
//               "none" and HMAC (HS256 with the public key as the secret: the classic
//               confusion) are refused whatever the token says.
//  * iss, aud — exactly the configured issuer; the audience (or the console's client id, whose ID
//               tokens the console sends) is aud or one element of aud.
//  * exp      — required; nbf when present; both with at most `clock_skew_s` of slack.
//  * sub      — required: printable ASCII, 1..255 characters. The caller is "oidc:<sub>".
//  * role     — the claim `role_claim`: viewer, member, tenant-admin or admin.
//  * tenant   — the claim `tenant_claim`: a tenant path (the caller's scope); ignored for admin.
// Every refusal is UNAUTHENTICATED "invalid bearer token", the Authenticator's one answer for a
// wrong credential: nothing tells a caller which check failed. A tenant that does not exist yet
// is, as for an API key, an empty subtree.
//
// Thread safety: immutable after Create; Verify may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/caller.h"
#include "api/jwks.h"
#include "base/status.h"

namespace gpupool::api {

struct OidcOptions {
  std::string issuer;
  std::string audience;
  // The issuer's signing keys: either one fixed key, PEM "PUBLIC KEY" (RSA or EC P-256), or
  // `keys`, which answers the candidates for a token's kid (JwksCache::KeysFor).
  std::string public_key_pem;
  std::function<std::vector<Jwk>(std::string_view kid)> keys;
  // Also accepted as the audience: the client id of the console's sign-in ("" = none).
  std::string console_client_id;
  std::string tenant_claim = "gpupool_tenant";
  std::string role_claim = "gpupool_role";
  std::vector<std::string> algorithms = {"RS256", "ES256"};
  int64_t clock_skew_s = 60;  // 0..300
};

class OidcVerifier {
 public:
  // INVALID_ARGUMENT naming the option: empty issuer/audience/claims, an algorithm other than
  // RS256/ES256, a fixed key that is not a PEM public key or does not suit any configured
  // algorithm (or both a fixed key and `keys`, or neither), a skew outside 0..300. `now_s` (seconds
  // since the epoch) defaults to the system clock.
  static Result<std::shared_ptr<const OidcVerifier>> Create(
      OidcOptions options, std::function<int64_t()> now_s = nullptr);

  Result<CallContext> Verify(std::string_view token) const;

 private:
  OidcVerifier() = default;
  // libjwt's jwt_alg_t value for `key`'s type, if the options allow it; -1 otherwise.
  int AlgFor(const Jwk& key) const;

  OidcOptions options_;
  std::vector<Jwk> fixed_;  // the fixed key, when there is one
  std::function<int64_t()> now_s_;
};

}  // namespace gpupool::api
