#include "api/tls/node_identity.h"

#include <fstream>
#include <sstream>

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
                                                             NodeIdentityOptions options) {
  std::unique_ptr<NodeIdentities> ids(new NodeIdentities(ca, std::move(options)));
  std::ifstream in(ca->dir() + "/nodes");
  std::string line;
  MutexLock lock(&ids->mu_);  // not shared yet; taken so the analysis can check every access
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string node;
    Binding b;
    int revoked = 0;
    if (!(fields >> node >> b.serial_hex >> b.not_after_s >> revoked)) {
      return Status::Internal(ca->dir() + "/nodes: malformed line '" + line + "'");
    }
    b.revoked = revoked != 0;
    ids->nodes_[node] = b;
  }
  return ids;
}

Status NodeIdentities::Save() const {
  std::ostringstream out;
  for (const auto& [node, b] : nodes_) {
    out << node << ' ' << b.serial_hex << ' ' << b.not_after_s << ' ' << (b.revoked ? 1 : 0)
        << '\n';
  }
  return WritePrivateFile(ca_->dir() + "/nodes", out.str());
}

Result<IssuedCert> NodeIdentities::Issue(const std::string& node, std::string_view csr_pem) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string pem,
                           ca_->SignNodeCsr(csr_pem, node, options_.cert_validity));
  GPUPOOL_ASSIGN_OR_RETURN(CertInfo info, ParseCert(pem));
  Binding previous = nodes_[node];
  nodes_[node] = Binding{info.serial_hex, info.not_after_s, false};
  if (Status s = Save(); !s.ok()) {
    nodes_[node] = previous;  // nothing is handed out that is not durable
    return s;
  }
  return IssuedCert{std::move(pem), ca_->ca_pem(), info.not_after_s};
}

Result<IssuedCert> NodeIdentities::Join(std::string_view token, const std::string& node,
                                        std::string_view csr_pem) {
  GPUPOOL_RETURN_IF_ERROR(ValidateName(node, "node_name"));
  if (token.empty() || !TokenMatches(options_.join_tokens, token)) {
    LogWarn(kComponent, "join refused: bad token", {{"node", node}});
    return Status::Unauthenticated("the join token is not accepted");
  }
  MutexLock lock(&mu_);
  if (auto it = nodes_.find(node); it != nodes_.end() && !it->second.revoked) {
    LogWarn(kComponent, "join refused: node already enrolled", {{"node", node}});
    return Status::PermissionDenied("node '" + node +
                                    "' is already enrolled: renew with its certificate, or have "
                                    "an admin revoke it first");
  }
  GPUPOOL_ASSIGN_OR_RETURN(IssuedCert cert, Issue(node, csr_pem));
  LogInfo(kComponent, "node enrolled", {{"node", node}});
  return cert;
}

Result<IssuedCert> NodeIdentities::Renew(const PeerCert& peer, std::string_view csr_pem) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(peer.common_name);
  if (it == nodes_.end() || it->second.revoked || it->second.serial_hex != peer.serial_hex) {
    LogWarn(kComponent, "renew refused", {{"node", peer.common_name}});
    return Status::Unauthenticated("the certificate is not this node's current one");
  }
  GPUPOOL_ASSIGN_OR_RETURN(IssuedCert cert, Issue(peer.common_name, csr_pem));
  LogInfo(kComponent, "node certificate renewed", {{"node", peer.common_name}});
  return cert;
}

Status NodeIdentities::CheckRegister(const PeerCert* peer, const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (peer == nullptr) {
    if (it != nodes_.end() && !it->second.revoked) {
      return Status::PermissionDenied("node '" + node +
                                      "' is enrolled: connect with its certificate");
    }
    if (options_.require_certificates) {
      return Status::Unauthenticated("agents must connect with a node certificate (join first)");
    }
    return Status::Ok();
  }
  if (peer->common_name != node) {
    return Status::PermissionDenied("the certificate is for node '" + peer->common_name +
                                    "', not '" + node + "'");
  }
  if (it == nodes_.end() || it->second.revoked) {
    return Status::PermissionDenied("node '" + node + "': the certificate is revoked");
  }
  if (it->second.serial_hex != peer->serial_hex) {
    return Status::Unauthenticated("node '" + node +
                                   "': the certificate has been superseded by a newer one");
  }
  return Status::Ok();
}

Status NodeIdentities::Revoke(const std::string& node) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return Status::NotFound("node '" + node + "' was never enrolled");
  const Binding previous = it->second;
  it->second.revoked = true;
  if (Status s = Save(); !s.ok()) {
    it->second = previous;
    return s;
  }
  LogWarn(kComponent, "node certificate revoked", {{"node", node}});
  return Status::Ok();
}

bool NodeIdentities::Enrolled(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  return it != nodes_.end() && !it->second.revoked;
}

}  // namespace gpupool::api::tls
