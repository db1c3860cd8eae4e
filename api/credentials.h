// Credentials: the secrets gpupool hands out — the admin credential written on first start and
// the API keys — and how they are kept: only a SHA-256 digest of a key's secret is stored.
//
// An API key reads `gpk_<id>_<secret>`: `id` (12 hex digits) names the key in lists, audits and
// revocations and is not secret; `secret` is 32 random bytes (OpenSSL's RAND_bytes) in hex. The
// store keeps `id` and SHA-256(secret); a presented key is looked up by id and its digest compared
// in constant time. 256 bits of entropy make a plain (unsalted, fast) hash sufficient: there is
// nothing to guess.
//
// The admin credential is a bearer token of the same strength, in `<data-dir>/admin.token`
// (mode 0600), created on the first start and kept across restarts; it authenticates as admin.
//
// Thread safety: free functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::api {

// `bytes` random bytes as lowercase hex. INTERNAL when the system's randomness fails.
Result<std::string> RandomHex(size_t bytes);

// SHA-256 of `data`, lowercase hex.
std::string Sha256Hex(std::string_view data);

// Compares without an early exit, so the time taken does not reveal a common prefix.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// An API key's parts. Parse: INVALID_ARGUMENT (no detail) unless `gpk_<12 hex>_<64 hex>`.
struct ApiKeySecret {
  std::string id;
  std::string secret;
  std::string Text() const { return "gpk_" + id + "_" + secret; }
};
Result<ApiKeySecret> NewApiKeySecret();
Result<ApiKeySecret> ParseApiKey(std::string_view text);
bool LooksLikeApiKey(std::string_view text);

// A node join token an admin creates (scheduler/join_tokens.h): `gpj_<12 hex id>_<64 hex>`,
// the same strength as an API key; only the SHA-256 of the secret part is stored. Parse:
// INVALID_ARGUMENT (no detail) unless it has that form.
Result<ApiKeySecret> NewJoinTokenSecret();
Result<ApiKeySecret> ParseJoinToken(std::string_view text);
bool LooksLikeJoinToken(std::string_view text);
inline std::string JoinTokenText(const ApiKeySecret& k) { return "gpj_" + k.id + "_" + k.secret; }

// Reads `path`, or creates it (0600) holding a fresh token when it does not exist: the admin
// credential (`<data-dir>/admin.token`) and the node join token (`<data-dir>/node.token`). INTERNAL
// naming the file when it cannot be read or written; FAILED_PRECONDITION when it is readable by
// others than its owner or empty (`what` names the credential in the message).
Result<std::string> LoadOrCreateTokenFile(const std::string& path, std::string_view what);

}  // namespace gpupool::api
