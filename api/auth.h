// Authenticator: the one place where a request's credentials become a CallContext, shared by the
// gRPC face (`authorization` metadata) and the REST face (`Authorization` header).
//
// Credentials are static bearer tokens from the daemon's config: `Authorization: Bearer <token>`.
// Each token names a principal (a tenant path such as "acme/research/alice", or an admin name) and
// whether it is an admin. With no tokens configured, authentication is off and every caller is an
// admin with an empty principal — the single-user default of a fresh install.
//
// Failures are UNAUTHENTICATED with a message that says what was wrong (missing header, not a
// bearer token, unknown token) without echoing the token. Tokens are compared in constant time.
//
// Thread safety: immutable after construction; Authenticate() may be called from any thread.
#pragma once

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

class Authenticator {
 public:
  // Authentication off: everyone is an admin with an empty principal.
  Authenticator() = default;

  // Tokens must be non-empty, unique and name a principal; INVALID_ARGUMENT names the offender
  // by position (tokens are secrets and never appear in messages or logs).
  static Result<Authenticator> Create(std::vector<ApiToken> tokens);

  bool enabled() const { return !tokens_.empty(); }

  // `authorization` is the raw header or metadata value, empty when the caller sent none.
  Result<CallContext> Authenticate(std::string_view authorization) const;

 private:
  explicit Authenticator(std::vector<ApiToken> tokens) : tokens_(std::move(tokens)) {}

  std::vector<ApiToken> tokens_;
};

}  // namespace gpupool::api
