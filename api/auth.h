// Authenticator: the one place where a request's credentials become a CallContext, shared by the
// gRPC face (`authorization` metadata) and the REST face (`Authorization` header).
//
// Credentials are static bearer tokens from the daemon's config: `Authorization: Bearer <token>`.
// Each token names a principal (a tenant path such as "acme/research/alice", or an admin name) and
// whether it is an admin. With no tokens configured, authentication is off and every caller is an
// admin with an empty principal — the single-user default of a fresh install.
//
// API keys from PostgreSQL (`gpk_<id>_<secret>`) are checked through a KeyLookup on every
// request: the stored SHA-256 of the secret must match, and the key must be neither revoked nor
// expired.
//
// Failures are UNAUTHENTICATED with a message that says what was wrong (missing header, not a
// bearer token) without echoing the token; every wrong credential — unknown, malformed, revoked,
// expired — gets the same "invalid bearer token", so an attacker learns nothing about which keys
// exist. Tokens and digests are compared in constant time. A key store that cannot answer gives
// UNAVAILABLE (try again), not UNAUTHENTICATED.
//
// JWT bearer tokens from an external OIDC issuer (three base64url segments joined by dots) go to
// the BearerVerifier when one is set (api/oidc.h); its refusals are the same "invalid bearer
// token".
//
// ReplaceTokens swaps the token list in place (gpupoold's config reload): copies of an
// Authenticator share one list, so the servers holding it see the new tokens at once.
//
// Thread safety: Authenticate() and ReplaceTokens() may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/service.h"
#include "base/status.h"

namespace gpupool::api {

struct ApiToken {
  std::string token;
  std::string principal;
  bool admin = false;
  // A non-admin token's role within the subtree `principal`: member unless the config says.
  Role role = Role::kMember;
};

// An API key as the lookup finds it (scheduler/api_keys.h has the stored record).
struct StoredKey {
  std::string tenant;  // scope; empty for an admin key
  Role role = Role::kViewer;
  std::string secret_sha256;
  int64_t expire_ms = 0;  // 0 = never
  int64_t revoke_ms = 0;  // 0 = active
};
// Finds a key by id on every request (no cache, so a revocation counts at once): nullopt for an
// unknown id, UNAVAILABLE when the store cannot answer.
using KeyLookup = std::function<Result<std::optional<StoredKey>>(const std::string& id)>;
// Verifies a JWT bearer token (api/oidc.h OidcVerifier::Verify).
using BearerVerifier = std::function<Result<CallContext>(std::string_view token)>;
// A compact JWS: three non-empty base64url segments joined by two dots.
bool LooksLikeJwt(std::string_view token);

class Authenticator {
 public:
  // Authentication off: everyone is an admin with an empty principal.
  Authenticator() = default;

  // Tokens must be non-empty, unique and name a principal; INVALID_ARGUMENT names the offender
  // by position (tokens are secrets and never appear in messages or logs). `keys`, when set,
  // accepts API keys (`gpk_<id>_<secret>`, api/credentials.h) too.
  // `jwt`, when set, accepts JWT bearer tokens (api/oidc.h).
  static Result<Authenticator> Create(std::vector<ApiToken> tokens, KeyLookup keys = nullptr,
                                      BearerVerifier jwt = nullptr);

  bool enabled() const { return !tokens()->empty() || keys_ != nullptr || jwt_ != nullptr; }

  // Takes `from`'s tokens (built by Create; its key lookup is not taken). Calls already
  // authenticated keep their identity.
  void ReplaceTokens(const Authenticator& from);

  // `authorization` is the raw header or metadata value, empty when the caller sent none.
  Result<CallContext> Authenticate(std::string_view authorization) const;

 private:
  using TokenList = std::shared_ptr<const std::vector<ApiToken>>;
  struct Shared {
    std::mutex mu;
    TokenList list = std::make_shared<const std::vector<ApiToken>>();  // guarded by mu
  };
  Authenticator(std::vector<ApiToken> tokens, KeyLookup keys, BearerVerifier jwt);
  TokenList tokens() const;
  Result<CallContext> AuthenticateKey(std::string_view key) const;

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  KeyLookup keys_;
  BearerVerifier jwt_;
};

}  // namespace gpupool::api
