// NodeIdentities: which certificate speaks for which node, and how a node gets one.
//
// Model (docs/security.md, "Agents"):
//  * Join: an agent that has no certificate sends a CSR with a join token for a node name: a
//    static one (DATA_DIR/node.token, auth.node_tokens), or one an admin created
//    (`gpupoolctl nodes join-tokens create`, scheduler/join_tokens.h) with its own expiry, use
//    limit and revocation, one use counted per enrolment. A token may enrol a name that no
//    certificate holds yet, never one that is enrolled: a leaked token cannot take over an
//    existing node. The CA signs the CSR with CN = the node name (api/tls/pki.h).
//  * Renew: a node presenting its current, verified certificate (mutual TLS) gets a new one for
//    the same name; from then on only the newest serial is accepted, so rotation retires the old
//    key. Agents renew in the last third of a certificate's life.
//  * Register: over mutual TLS the node name in Register must be the certificate's CN and its
//    serial the node's current one (else PERMISSION_DENIED / UNAUTHENTICATED, logged). Without a
//    certificate, an enrolled name is refused (its certificate must be used), and so is every other
//    one unless `require_certificates` is off (only gpupoold --insecure: plaintext, loopback).
//  * Revoke (admin): the node's certificate is refused from then on, and a new Join for the name
//    is allowed (re-enrolment after a reinstall).
// State — each node's current serial and whether it is revoked — lives in a NodeEnrolmentStore
// (scheduler/node_enrolments.h; PostgreSQL in gpupoold), read on every Join, Renew and Register
// and changed by compare-and-set, so replicas sharing the database agree: a node enrolled
// through one registers with another after a failover, and a revocation on one is refused by
// the other. An older install's `<tls-dir>/nodes` file is imported once at Open (rows the store
// already has win) and renamed `nodes.imported`. A store that cannot answer refuses the call
// with its UNAVAILABLE; the agent retries.
//
// Thread safety: every method may be called from any thread (the store is thread-safe; this
// class keeps no mutable state).
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "base/tls/pki.h"
#include "scheduler/join_tokens.h"
#include "scheduler/node_enrolments.h"

namespace gpupool::api::tls {

using ::gpupool::tls::CertAuthority;
using ::gpupool::tls::CertInfo;
using ::gpupool::tls::KeyAndCsr;
using ::gpupool::tls::NewKeyAndCsr;
using ::gpupool::tls::ParseCert;
using ::gpupool::tls::WritePrivateFile;

// The verified client certificate of a connection.
struct PeerCert {
  std::string common_name;
  std::string serial_hex;
};

struct NodeIdentityOptions {
  std::set<std::string> join_tokens;  // static: DATA_DIR/node.token and auth.node_tokens
  // Tokens an admin creates; null = static tokens only. Not owned; must outlive this.
  JoinTokenStore* created_tokens = nullptr;
  const Clock* clock = nullptr;  // expiry and use times; the system clock when null
  std::chrono::seconds cert_validity{30 * 86'400};
  // Refuse agents without a certificate (gpupoold: always, unless --insecure, where plaintext
  // leaves no certificate to present).
  bool require_certificates = true;
};

struct IssuedCert {
  std::string cert_pem;
  std::string ca_pem;
  int64_t not_after_s = 0;
};

// How a Join call authenticated, for the audit log: "join-token:<id>", "static-join-token", or
// "none" (no token, or one not accepted).
struct JoinCredential {
  std::string key_id = "none";
};

class NodeIdentities {
 public:
  // REQUIRES: `ca` and `store` outlive this. Imports `<ca.dir()>/nodes` into `store` when the
  // file is there (then renames it `nodes.imported`); an error names the file and line.
  static Result<std::unique_ptr<NodeIdentities>> Open(const CertAuthority* ca,
                                                      NodeEnrolmentStore* store,
                                                      NodeIdentityOptions options);

  // UNAUTHENTICATED when the token is not accepted: unknown or wrong ("the join token is not
  // accepted"), or known and revoked, expired or used up (saying which); PERMISSION_DENIED when
  // the node is enrolled. `how` (may be null) is set to the credential that was presented.
  Result<IssuedCert> Join(std::string_view token, const std::string& node, std::string_view csr_pem,
                          JoinCredential* how = nullptr);
  // Join tokens an admin manages (FAILED_PRECONDITION when there is no store): Create, for
  // `ttl_ms` from now, fills in `record` (id, digest, times) and returns the token's text, shown
  // once; the record never holds it.
  Result<std::string> CreateJoinToken(JoinTokenRecord* record, int64_t ttl_ms);
  Result<std::vector<JoinTokenRecord>> ListJoinTokens();
  Status RevokeJoinToken(const std::string& id);
  // Now on the clock that expiries are judged by (NodeIdentityOptions::clock).
  int64_t NowMs() const { return clock_->NowMicros() / 1000; }
  Result<IssuedCert> Renew(const PeerCert& peer, std::string_view csr_pem);
  // May a connection with `peer` (null: no client certificate) register as `node`?
  Status CheckRegister(const PeerCert* peer, const std::string& node) const;
  // NOT_FOUND when the node was never enrolled.
  Status Revoke(const std::string& node);
  // Enrolled and not revoked; false too when the store cannot answer.
  bool Enrolled(const std::string& node) const;

 private:
  NodeIdentities(const CertAuthority* ca, NodeEnrolmentStore* store, NodeIdentityOptions options)
      : ca_(ca),
        store_(store),
        options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()) {}
  // The created token `token` names, checked: its id on success; UNAUTHENTICATED otherwise.
  Result<std::string> CheckCreatedToken(std::string_view token, const std::string& node);
  Status NoTokenStore() const;
  // Signs the CSR for `node` and binds the node to it if its binding is still
  // `expected_serial` (NodeEnrolmentStore::Bind); FAILED_PRECONDITION when it is not.
  Result<IssuedCert> Issue(const std::string& node, std::string_view csr_pem,
                           const std::string& expected_serial);
  Status ImportFile();

  const CertAuthority* ca_;
  NodeEnrolmentStore* store_;
  const NodeIdentityOptions options_;
  const Clock* clock_;
};

}  // namespace gpupool::api::tls
