// EnrollService: NodeEnrollService over NodeIdentities — Join (join token + CSR), Renew (the
// node's current certificate over mutual TLS) and RevokeNode (an admin, by bearer token, which
// also ends the node's live agent stream through `on_revoke`).
//
// PeerCertOf reads a call's verified client certificate (gRPC's auth context) — shared with the
// AgentHub, which binds Register's node name to it.
//
// Thread safety: handlers run on gRPC threads; NodeIdentities and the Authenticator are
// thread-safe and must outlive the service.
#pragma once

#include <functional>
#include <optional>

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
                std::function<void(const std::string&)> on_revoke = {})
      : ids_(ids), auth_(auth), on_revoke_(std::move(on_revoke)) {}

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* ctx, const v1::JoinRequest* req,
                                 v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* Renew(grpc::CallbackServerContext* ctx, const v1::RenewRequest* req,
                                  v1::JoinResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeNode(grpc::CallbackServerContext* ctx,
                                       const v1::RevokeNodeRequest* req,
                                       v1::RevokeNodeResponse* resp) override;

 private:
  NodeIdentities* ids_;
  const Authenticator* auth_;
  std::function<void(const std::string&)> on_revoke_;
};

}  // namespace gpupool::api::tls
