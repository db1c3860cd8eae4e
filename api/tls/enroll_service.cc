#include "api/tls/enroll_service.h"

#include <grpcpp/grpcpp.h>

#include "api/status_convert.h"

namespace gpupool::api::tls {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

void Fill(const IssuedCert& c, v1::JoinResponse* resp) {
  resp->set_cert_pem(c.cert_pem);
  resp->set_ca_pem(c.ca_pem);
  resp->set_not_after_unix(c.not_after_s);
}

}  // namespace

std::optional<PeerCert> PeerCertOf(const grpc::ServerContextBase& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return std::nullopt;
  const std::vector<grpc::string_ref> pems = auth->FindPropertyValues("x509_pem_cert");
  if (pems.empty()) return std::nullopt;
  Result<CertInfo> info = ParseCert(std::string_view(pems[0].data(), pems[0].size()));
  if (!info.ok()) return std::nullopt;
  return PeerCert{info->common_name, info->serial_hex};
}

grpc::ServerUnaryReactor* EnrollService::Join(grpc::CallbackServerContext* ctx,
                                              const v1::JoinRequest* req, v1::JoinResponse* resp) {
  Result<IssuedCert> c = ids_->Join(req->token(), req->node_name(), req->csr_pem());
  if (c.ok()) Fill(*c, resp);
  return Finish(ctx, c.status());
}

grpc::ServerUnaryReactor* EnrollService::Renew(grpc::CallbackServerContext* ctx,
                                               const v1::RenewRequest* req,
                                               v1::JoinResponse* resp) {
  std::optional<PeerCert> peer = PeerCertOf(*ctx);
  if (!peer) {
    return Finish(ctx, Status::Unauthenticated("renew needs the node's certificate (mutual TLS)"));
  }
  Result<IssuedCert> c = ids_->Renew(*peer, req->csr_pem());
  if (c.ok()) Fill(*c, resp);
  return Finish(ctx, c.status());
}

grpc::ServerUnaryReactor* EnrollService::RevokeNode(grpc::CallbackServerContext* ctx,
                                                    const v1::RevokeNodeRequest* req,
                                                    v1::RevokeNodeResponse*) {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  std::string_view value;
  if (it != md.end()) value = std::string_view(it->second.data(), it->second.size());
  Result<CallContext> caller = auth_->Authenticate(value);
  if (!caller.ok()) return Finish(ctx, caller.status());
  if (!caller->admin()) {
    return Finish(ctx, Status::PermissionDenied("revoke node: requires an admin"));
  }
  Status s = ids_->Revoke(req->node_name());
  if (s.ok() && on_revoke_) on_revoke_(req->node_name());
  return Finish(ctx, s);
}

}  // namespace gpupool::api::tls
