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
// ReplaceTokens swaps the token list in place (gpupoold's config reload): copies of an
// Authenticator share one list, so the servers holding it see the new tokens at once.
//
// Thread safety: Authenticate() and ReplaceTokens() may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
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
};

class Authenticator {
 public:
  // Authentication off: everyone is an admin with an empty principal.
  Authenticator() = default;

  // Tokens must be non-empty, unique and name a principal; INVALID_ARGUMENT names the offender
  // by position (tokens are secrets and never appear in messages or logs).
  static Result<Authenticator> Create(std::vector<ApiToken> tokens);

  bool enabled() const { return !tokens()->empty(); }

  // Takes `from`'s tokens (built by Create). Calls already authenticated keep their identity.
  void ReplaceTokens(const Authenticator& from);

  // `authorization` is the raw header or metadata value, empty when the caller sent none.
  Result<CallContext> Authenticate(std::string_view authorization) const;

 private:
  using TokenList = std::shared_ptr<const std::vector<ApiToken>>;
  struct Shared {
    std::mutex mu;
    TokenList list = std::make_shared<const std::vector<ApiToken>>();  // guarded by mu
  };
  explicit Authenticator(std::vector<ApiToken> tokens);
  TokenList tokens() const;

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

}  // namespace gpupool::api
