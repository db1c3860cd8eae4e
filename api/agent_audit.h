// AgentAudit: audit records for what the agent stream changes (docs/security.md, "Audit log"),
// beside the API faces' AuditHook, which never sees the stream's messages:
//
//   verb          resource       when
//   RegisterNode  node/<name>    every registration: accepted (OK) or refused — a certificate for
//                                node A registering as B, a bad node token, a device that
//                                contradicts the catalog, a second register, the scheduler's no
//   ReportTask    task/<id>      every task report (RUNNING, SUCCEEDED, FAILED…; the state and
//                                exit code in the message), malformed ones as INVALID_ARGUMENT
//
// The actor is the node, named by how it authenticated: key id "cert:<serial>" for a verified
// client certificate (principal its common name), "node-token" once a node token was accepted
// (--insecure daemons with auth.node_tokens; principal the node name it claims), else "none" (no
// credential at all: refused on a secure daemon, unauthenticated on an --insecure one); role
// "node". Records belong
// to no tenant (admins see them). Source is the stream's peer address; one request id per stream.
// Records are kept but not waited for: an agent's report is never refused for the audit's sake.
//
// Thread safety: AgentAudit is immutable after construction but for the atomic token flag; every
// method may be called from any thread.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>

#include "api/audit.h"
#include "api/tls/node_identity.h"
#include "base/status.h"

namespace gpupool::v1 {
class TaskUpdate;
}

namespace gpupool::api {

class AgentAudit {
 public:
  // `sink` null: records nothing.
  AgentAudit(AuditSink* sink, std::string source, std::optional<tls::PeerCert> cert);

  void Register(const std::string& claimed_node, const Status& outcome) const;
  // The stream presented an accepted node token: records name "node-token" from now on.
  void TokenAccepted() const { by_token_ = true; }
  void TaskReport(const std::string& node, const v1::TaskUpdate& update,
                  const Status& outcome) const;

 private:
  void Record(std::string_view verb, std::string resource, const std::string& claimed_node,
              const Status& outcome) const;

  AuditSink* const sink_;
  const std::string source_;
  const std::optional<tls::PeerCert> cert_;
  mutable std::atomic<bool> by_token_{false};
  const std::string request_id_;
};

}  // namespace gpupool::api
