#include "api/auth.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>

#include "api/credentials.h"

namespace gpupool::api {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool LooksLikeJwt(std::string_view token) {
  int dots = 0;
  size_t segment = 0;
  for (char c : token) {
    if (c == '.') {
      if (segment == 0) return false;
      ++dots;
      segment = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      ++segment;
    } else {
      return false;
    }
  }
  return dots == 2 && segment > 0;
}

Result<Authenticator> Authenticator::Create(std::vector<ApiToken> tokens, KeyLookup keys,
                                            BearerVerifier jwt) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const ApiToken& t = tokens[i];
    const std::string where = "auth token #" + std::to_string(i + 1);
    if (t.token.empty()) return Status::InvalidArgument(where + ": token is empty");
    if (Trim(t.token) != t.token || t.token.find_first_of(" \t\r\n") != std::string::npos) {
      return Status::InvalidArgument(where + ": token must not contain whitespace");
    }
    if (t.principal.empty()) return Status::InvalidArgument(where + ": principal is empty");
    if (!seen.insert(t.token).second) {
      return Status::InvalidArgument(where + " (principal '" + t.principal +
                                     "'): token is already used by another principal");
    }
  }
  return Authenticator(std::move(tokens), std::move(keys), std::move(jwt));
}

Authenticator::Authenticator(std::vector<ApiToken> tokens, KeyLookup keys, BearerVerifier jwt)
    : keys_(std::move(keys)), jwt_(std::move(jwt)) {
  shared_->list = std::make_shared<const std::vector<ApiToken>>(std::move(tokens));
}

Authenticator::TokenList Authenticator::tokens() const {
  std::lock_guard lock(shared_->mu);
  return shared_->list;
}

void Authenticator::ReplaceTokens(const Authenticator& from) {
  TokenList list = from.tokens();
  std::lock_guard lock(shared_->mu);
  shared_->list = std::move(list);
}

Result<CallContext> Authenticator::Authenticate(std::string_view authorization) const {
  const TokenList list = tokens();
  if (list->empty() && keys_ == nullptr && jwt_ == nullptr) return CallContext::Admin("insecure");
  authorization = Trim(authorization);
  if (authorization.empty()) {
    return Status::Unauthenticated(
        "missing credentials: send the header 'Authorization: Bearer <token>'");
  }
  const size_t space = authorization.find_first_of(" \t");
  if (space == std::string_view::npos || !IEquals(authorization.substr(0, space), "bearer")) {
    return Status::Unauthenticated(
        "unsupported authorization scheme: expected 'Authorization: Bearer <token>'");
  }
  const std::string_view token = Trim(authorization.substr(space + 1));
  if (keys_ != nullptr && LooksLikeApiKey(token)) return AuthenticateKey(token);
  if (jwt_ != nullptr && LooksLikeJwt(token)) {
    // A bootstrap token may happen to have the same shape: those are compared below.
    if (Result<CallContext> caller = jwt_(token); caller.ok()) return caller;
  }
  const ApiToken* match = nullptr;
  for (const ApiToken& t : *list) {  // no early exit: every token is compared
    if (ConstantTimeEquals(token, t.token)) match = &t;
  }
  if (match == nullptr) return Status::Unauthenticated("invalid bearer token");
  if (match->admin) return CallContext::Admin("token:" + match->principal);
  return CallContext::Of("token:" + match->principal, match->principal,
                         match->role == Role::kAdmin ? Role::kMember : match->role);
}

Result<CallContext> Authenticator::AuthenticateKey(std::string_view text) const {
  const Status invalid = Status::Unauthenticated("invalid bearer token");
  Result<ApiKeySecret> key = ParseApiKey(text);
  if (!key.ok()) return invalid;
  Result<std::optional<StoredKey>> stored = keys_(key->id);
  if (!stored.ok()) {
    return Status::Unavailable("cannot check the credential now; try again");
  }
  if (!stored->has_value()) return invalid;
  const StoredKey& k = **stored;
  if (!ConstantTimeEquals(Sha256Hex(key->secret), k.secret_sha256)) return invalid;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  if (k.revoke_ms != 0 || (k.expire_ms != 0 && now_ms >= k.expire_ms)) return invalid;
  if (k.role == Role::kAdmin) return CallContext::Admin("key:" + key->id);
  return CallContext::Of("key:" + key->id, k.tenant, k.role);
}

}  // namespace gpupool::api
