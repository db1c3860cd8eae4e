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
// Thread safety: immutable after construction; Authenticate() may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
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

class Authenticator {
 public:
  // Authentication off: everyone is an admin with an empty principal.
  Authenticator() = default;

  // Tokens must be non-empty, unique and name a principal; INVALID_ARGUMENT names the offender
  // by position (tokens are secrets and never appear in messages or logs). `keys`, when set,
  // accepts API keys (`gpk_<id>_<secret>`, api/credentials.h) too.
  static Result<Authenticator> Create(std::vector<ApiToken> tokens, KeyLookup keys = nullptr);

  bool enabled() const { return !tokens_.empty() || keys_ != nullptr; }

  // `authorization` is the raw header or metadata value, empty when the caller sent none.
  Result<CallContext> Authenticate(std::string_view authorization) const;

 private:
  Authenticator(std::vector<ApiToken> tokens, KeyLookup keys)
      : tokens_(std::move(tokens)), keys_(std::move(keys)) {}
  Result<CallContext> AuthenticateKey(std::string_view key) const;

  std::vector<ApiToken> tokens_;
  KeyLookup keys_;
};

}  // namespace gpupool::api
