// JoinTokenStore: the port through which gpupoold keeps the node join tokens an admin creates
// (docs/security.md, "Join tokens"): each has an id, the SHA-256 of its secret (never the
// secret), an optional expiry and use limit, a use count, and a revocation. A token only buys a
// node certificate (api/tls/node_identity.h); registration always needs the certificate.
// store/pg_join_tokens.h keeps them in PostgreSQL, shared by every replica; store/
// memory_join_tokens.h in memory for tests. tests/store/join_token_conformance.cc holds both to
// one suite.
//
// Beside the Store port, like NodeEnrolmentStore: tokens are read on gRPC threads and must not
// queue behind the core's group commits.
//
// Errors: UNAVAILABLE when the database cannot be reached; ALREADY_EXISTS from Create for a
// taken id; NOT_FOUND for an unknown id; FAILED_PRECONDITION from Use, with the reason, when
// the token is revoked, expired or used up (nothing changes then); INVALID_ARGUMENT for a
// malformed record.
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct JoinTokenRecord {
  std::string id;             // 12 lowercase hex digits, shown in lists and the audit log
  std::string secret_sha256;  // 64 lowercase hex digits
  std::string note;           // the admin's words: "rack 12 refresh"
  std::string created_by;     // the creating credential's id
  int64_t create_ms = 0;
  int64_t expire_ms = 0;  // 0 = never
  int64_t max_uses = 0;   // 0 = unlimited
  int64_t uses = 0;
  int64_t revoke_ms = 0;  // 0 = not revoked
  std::string last_node;  // the node the latest use enrolled
  int64_t last_use_ms = 0;
  friend bool operator==(const JoinTokenRecord&, const JoinTokenRecord&) = default;
};

// What `t` is at `now_ms`: "usable", "revoked", "expired" or "used-up" (in that order of
// precedence). The one rule for both JoinTokenUsable and the listing's state.
std::string_view JoinTokenState(const JoinTokenRecord& t, int64_t now_ms);

// OK when `t` may enrol a node at `now_ms`; else FAILED_PRECONDITION saying why ("join token
// 0123456789ab was revoked", "… expired at 2026-11-30T10:00:00Z", "… has been used 3 of 3
// times").
Status JoinTokenUsable(const JoinTokenRecord& t, int64_t now_ms);

class JoinTokenStore {
 public:
  virtual ~JoinTokenStore() = default;
  virtual Status Create(const JoinTokenRecord& t) = 0;
  virtual Result<std::optional<JoinTokenRecord>> Get(const std::string& id) = 0;
  // Every token, revoked and expired ones included, oldest first.
  virtual Result<std::vector<JoinTokenRecord>> List() = 0;
  // Revoking a revoked token is OK (its first revocation time stays).
  virtual Status Revoke(const std::string& id, int64_t now_ms) = 0;
  // Counts one use for `node`, compare-and-set: only while JoinTokenUsable(t, now_ms), so two
  // joins racing for a token's last use leave one winner.
  virtual Status Use(const std::string& id, const std::string& node, int64_t now_ms) = 0;
};

}  // namespace gpupool
