#include "api/tls/node_identity.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "api/credentials.h"
#include "api/validate.h"
#include "base/log.h"

namespace gpupool::api::tls {
namespace {

constexpr char kComponent[] = "api.tls";

bool TokenMatches(const std::set<std::string>& tokens, std::string_view token) {
  bool found = false;
  for (const std::string& t : tokens) {  // no early exit: every token is compared
    unsigned char diff = t.size() == token.size() ? 0 : 1;
    for (size_t i = 0; i < t.size() && i < token.size(); ++i) {
      diff |= static_cast<unsigned char>(t[i] ^ token[i]);
    }
    found |= diff == 0;
  }
  return found;
}

}  // namespace

Result<std::unique_ptr<NodeIdentities>> NodeIdentities::Open(const CertAuthority* ca,
                                                             NodeEnrolmentStore* store,
                                                             NodeIdentityOptions options) {
  std::unique_ptr<NodeIdentities> ids(new NodeIdentities(ca, store, std::move(options)));
  GPUPOOL_RETURN_IF_ERROR(ids->ImportFile());
  return ids;
}

// The file an older gpupoold kept (one "node serial not_after_s revoked" line per node) is read
// once into the store; renaming it afterwards keeps a later edit of it from looking effective.
Status NodeIdentities::ImportFile() {
  const std::string path = ca_->dir() + "/nodes";
  std::ifstream in(path);
  if (!in) return Status::Ok();  // a new install, or imported already
  std::vector<NodeEnrolment> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    NodeEnrolment e;
    int revoked = 0;
    if (!(fields >> e.node >> e.serial_hex >> e.not_after_s >> revoked)) {
      return Status::Internal(path + ":" + std::to_string(number) + ": malformed line '" + line +
                              "'");
    }
    e.revoked = revoked != 0;
    rows.push_back(std::move(e));
  }
  GPUPOOL_ASSIGN_OR_RETURN(int added, store_->Import(rows));
  std::error_code ec;
  std::filesystem::rename(path, path + ".imported", ec);
  if (ec) return Status::Internal("cannot rename " + path + " after importing it: " + ec.message());
  LogInfo(kComponent, "node enrolments imported into the database",
          {{"file", path},
           {"added", std::to_string(added)},
           {"kept", std::to_string(rows.size() - static_cast<size_t>(added))}});
  return Status::Ok();
}

Result<IssuedCert> NodeIdentities::Issue(const std::string& node, std::string_view csr_pem,
                                         const std::string& expected_serial) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string pem,
                           ca_->SignNodeCsr(csr_pem, node, options_.cert_validity));
  GPUPOOL_ASSIGN_OR_RETURN(CertInfo info, ParseCert(pem));
  // Nothing is handed out that is not durable: the binding commits before the certificate is
  // returned, and only if no other call (or replica) changed the node's binding meanwhile.
  GPUPOOL_RETURN_IF_ERROR(
      store_->Bind({node, info.serial_hex, info.not_after_s, false}, expected_serial));
  return IssuedCert{std::move(pem), ca_->ca_pem(), info.not_after_s};
}

Result<std::string> NodeIdentities::CheckCreatedToken(std::string_view token,
                                                      const std::string& node) {
  const auto not_accepted = [&] {
    LogWarn(kComponent, "join refused: bad token", {{"node", node}});
    return Status::Unauthenticated("the join token is not accepted");
  };
  Result<ApiKeySecret> parsed = ParseJoinToken(token);
  if (!parsed.ok() || options_.created_tokens == nullptr) return not_accepted();
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<JoinTokenRecord> t,
                           options_.created_tokens->Get(parsed->id));
  // Unknown and wrong secret answer alike: a guess learns nothing about which ids exist.
  if (!t || !ConstantTimeEquals(t->secret_sha256, Sha256Hex(parsed->secret))) {
    return not_accepted();
  }
  if (Status usable = JoinTokenUsable(*t, clock_->NowMicros() / 1000); !usable.ok()) {
    LogWarn(kComponent, "join refused",
            {{"node", node}, {"token", parsed->id}, {"reason", usable.message()}});
    return Status::Unauthenticated(usable.message());
  }
  return parsed->id;
}

Result<IssuedCert> NodeIdentities::Join(std::string_view token, const std::string& node,
                                        std::string_view csr_pem, JoinCredential* how) {
  JoinCredential ignored;
  if (how == nullptr) how = &ignored;
  GPUPOOL_RETURN_IF_ERROR(ValidateName(node, "node_name"));
  std::string created_id;  // set when a created token authenticated
  if (!token.empty() && TokenMatches(options_.join_tokens, token)) {
    how->key_id = "static-join-token";
  } else if (LooksLikeJoinToken(token)) {
    GPUPOOL_ASSIGN_OR_RETURN(created_id, CheckCreatedToken(token, node));
    how->key_id = "join-token:" + created_id;
  } else {
    LogWarn(kComponent, "join refused: bad token", {{"node", node}});
    return Status::Unauthenticated(token.empty() ? "a join token is required"
                                                 : "the join token is not accepted");
  }
  const auto already_enrolled = [&] {
    LogWarn(kComponent, "join refused: node already enrolled", {{"node", node}});
    return Status::PermissionDenied("node '" + node +
                                    "' is already enrolled: renew with its certificate, or have "
                                    "an admin revoke it first");
  };
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<NodeEnrolment> current, store_->Get(node));
  if (current && !current->revoked) return already_enrolled();
  if (!created_id.empty()) {
    // Counted before the certificate is signed: a use is never handed out twice, though a
    // signing that fails after it (a bad CSR) spends it.
    Status used = options_.created_tokens->Use(created_id, node, clock_->NowMicros() / 1000);
    if (used.code() == StatusCode::kFailedPrecondition) {
      return Status::Unauthenticated(used.message());  // used up by a racing join
    }
    GPUPOOL_RETURN_IF_ERROR(used);
  }
  Result<IssuedCert> cert = Issue(node, csr_pem, "");
  if (cert.status().code() == StatusCode::kFailedPrecondition) return already_enrolled();
  if (!cert.ok()) return cert.status();
  LogInfo(kComponent, "node enrolled", {{"node", node}});
  return cert;
}

Status NodeIdentities::NoTokenStore() const {
  return Status::FailedPrecondition("this gpupoold keeps no join tokens of its own");
}

Result<std::string> NodeIdentities::CreateJoinToken(JoinTokenRecord* out, int64_t ttl_ms) {
  if (options_.created_tokens == nullptr) return NoTokenStore();
  GPUPOOL_ASSIGN_OR_RETURN(ApiKeySecret secret, NewJoinTokenSecret());
  JoinTokenRecord record = *out;
  record.id = secret.id;
  record.secret_sha256 = Sha256Hex(secret.secret);
  record.create_ms = NowMs();
  record.expire_ms = record.create_ms + ttl_ms;
  record.uses = 0;
  record.revoke_ms = 0;
  GPUPOOL_RETURN_IF_ERROR(options_.created_tokens->Create(record));
  LogInfo(kComponent, "join token created", {{"token", record.id}, {"by", record.created_by}});
  *out = std::move(record);
  return JoinTokenText(secret);
}

Result<std::vector<JoinTokenRecord>> NodeIdentities::ListJoinTokens() {
  if (options_.created_tokens == nullptr) return std::vector<JoinTokenRecord>();
  return options_.created_tokens->List();
}

Status NodeIdentities::RevokeJoinToken(const std::string& id) {
  if (options_.created_tokens == nullptr) return NoTokenStore();
  GPUPOOL_RETURN_IF_ERROR(options_.created_tokens->Revoke(id, clock_->NowMicros() / 1000));
  LogInfo(kComponent, "join token revoked", {{"token", id}});
  return Status::Ok();
}

Result<IssuedCert> NodeIdentities::Renew(const PeerCert& peer, std::string_view csr_pem) {
  const auto refused = [&] {
    LogWarn(kComponent, "renew refused", {{"node", peer.common_name}});
    return Status::Unauthenticated("the certificate is not this node's current one");
  };
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<NodeEnrolment> current, store_->Get(peer.common_name));
  if (!current || current->revoked || current->serial_hex != peer.serial_hex) return refused();
  Result<IssuedCert> cert = Issue(peer.common_name, csr_pem, peer.serial_hex);
  if (cert.status().code() == StatusCode::kFailedPrecondition) return refused();
  if (!cert.ok()) return cert.status();
  LogInfo(kComponent, "node certificate renewed", {{"node", peer.common_name}});
  return cert;
}

Status NodeIdentities::CheckRegister(const PeerCert* peer, const std::string& node) const {
  if (peer != nullptr && peer->common_name != node) {
    return Status::PermissionDenied("the certificate is for node '" + peer->common_name +
                                    "', not '" + node + "'");
  }
  // Read on every Register, not cached: a revocation made through another replica counts here.
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<NodeEnrolment> current, store_->Get(node));
  const bool live = current && !current->revoked;
  if (peer == nullptr) {
    if (live) {
      return Status::PermissionDenied("node '" + node +
                                      "' is enrolled: connect with its certificate");
    }
    if (options_.require_certificates) {
      return Status::Unauthenticated("agents must connect with a node certificate (join first)");
    }
    return Status::Ok();
  }
  if (!live) return Status::PermissionDenied("node '" + node + "': the certificate is revoked");
  if (current->serial_hex != peer->serial_hex) {
    return Status::Unauthenticated("node '" + node +
                                   "': the certificate has been superseded by a newer one");
  }
  return Status::Ok();
}

Status NodeIdentities::Revoke(const std::string& node) {
  GPUPOOL_RETURN_IF_ERROR(store_->Revoke(node));
  LogWarn(kComponent, "node certificate revoked", {{"node", node}});
  return Status::Ok();
}

bool NodeIdentities::Enrolled(const std::string& node) const {
  Result<std::optional<NodeEnrolment>> current = store_->Get(node);
  return current.ok() && current->has_value() && !(*current)->revoked;
}

}  // namespace gpupool::api::tls
