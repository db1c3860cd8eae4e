#include "api/auth.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace gpupool::api {
namespace {

// Compares without an early exit, so the time taken does not reveal a common prefix.
bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

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

Result<Authenticator> Authenticator::Create(std::vector<ApiToken> tokens) {
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
  return Authenticator(std::move(tokens));
}

Authenticator::Authenticator(std::vector<ApiToken> tokens) {
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
  if (list->empty()) return CallContext{.principal = "", .admin = true};
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
  const ApiToken* match = nullptr;
  for (const ApiToken& t : *list) {  // no early exit: every token is compared
    if (ConstantTimeEquals(token, t.token)) match = &t;
  }
  if (match == nullptr) return Status::Unauthenticated("invalid bearer token");
  return CallContext{.principal = match->principal, .admin = match->admin};
}

}  // namespace gpupool::api
