// EnrollService: NodeEnrollService over NodeIdentities — Join (join token + CSR), Renew (the
// node's current certificate over mutual TLS), RevokeNode (an admin, by bearer token, which
// also ends the node's live agent stream through `on_revoke`) and the join tokens an admin
// creates, lists and revokes.
//
// Audit (api/audit.h, when a sink is given): every Join — with how it authenticated
// ("join-token:<id>", "static-join-token", "none") and, when refused, why — and every admin
// call, answered only once its record is durable.
//
// PeerCertOf reads a call's verified client certificate (gRPC's auth context) — shared with the
// AgentHub, which binds Register's node name to it.
//
// Thread safety: handlers run on gRPC threads; NodeIdentities and the Authenticator are
// thread-safe and must outlive the service.
#pragma once

#include <functional>
#include <optional>

#include "api/audit.h"
#include "api/auth.h"
#include "api/tls/node_identity.h"
#include "gpupool/v1/agent.grpc.pb.h"

namespace grpc {
class ServerContextBase;
}

namespace gpupool::api::tls {

// The verified client certificate of the call, if it came over mutual TLS with one.
std::optional<PeerCert> PeerCertOf(const grpc::ServerContextBase& ctx);

class EnrollService final : public v1::NodeEnrollService::CallbackService {
 public:
  EnrollService(NodeIdentities* ids, const Authenticator* auth,
                std::function<void(const std::string&)> on_revoke = {}, AuditSink* audit = nullptr)
      : ids_(ids), auth_(auth), on_revoke_(std::move(on_revoke)), audit_(audit) {}

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* Renew(grpc::CallbackServerContext* ctx, const v1::RenewRequest* req,
                                  v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeNode(grpc::CallbackServerContext* ctx,
                                       const v1::RevokeNodeRequest* req,
                                       v1::RevokeNodeResponse* resp) override;
  grpc::ServerUnaryReactor* CreateJoinToken(grpc::CallbackServerContext* ctx,
                                            const v1::CreateJoinTokenRequest* req,
                                            v1::CreateJoinTokenResponse* resp) override;
  grpc::ServerUnaryReactor* ListJoinTokens(grpc::CallbackServerContext* ctx,
                                           const v1::ListJoinTokensRequest* req,
                                           v1::ListJoinTokensResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeJoinToken(grpc::CallbackServerContext* ctx,
                                            const v1::RevokeJoinTokenRequest* req,
                                            v1::RevokeJoinTokenResponse* resp) override;

 private:
  // The caller, when it is an admin; else the refusal. `actor`: who called, for the audit log.
  Result<CallContext> Admin(grpc::CallbackServerContext* ctx, std::string_view what,
                            AuditActor* actor) const;
  // OK, or why a change may not be made now (its audit record could not be kept).
  Status Admit() const;
  // Answers `status`, after recording it when there is a sink (`actor` null: unauthenticated).
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const AuditActor& actor,
                                   std::string verb, std::string resource, const Status& status,
                                   std::string message = "");

  NodeIdentities* ids_;
  const Authenticator* auth_;
  std::function<void(const std::string&)> on_revoke_;
  AuditSink* audit_;
};

}  // namespace gpupool::api::tls
