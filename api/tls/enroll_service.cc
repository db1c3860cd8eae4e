#include "api/tls/enroll_service.h"

#include <grpcpp/grpcpp.h>

#include "api/status_convert.h"
#include "base/clock.h"

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

constexpr int64_t kDefaultTokenTtlS = 24 * 3600;
constexpr int64_t kMaxTokenTtlS = 365 * 86'400;

void Fill(const JoinTokenRecord& t, int64_t now_ms, v1::JoinToken* out) {
  out->set_id(t.id);
  out->set_note(t.note);
  out->set_created_by(t.created_by);
  out->set_create_unix_ms(t.create_ms);
  out->set_expire_unix_ms(t.expire_ms);
  out->set_max_uses(t.max_uses);
  out->set_uses(t.uses);
  out->set_revoke_unix_ms(t.revoke_ms);
  out->set_last_node(t.last_node);
  out->set_last_use_unix_ms(t.last_use_ms);
  out->set_state(std::string(JoinTokenState(t, now_ms)));
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

Result<CallContext> EnrollService::Admin(grpc::CallbackServerContext* ctx, std::string_view what,
                                         AuditActor* actor) const {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  std::string_view value;
  if (it != md.end()) value = std::string_view(it->second.data(), it->second.size());
  actor->key_id = "none";
  GPUPOOL_ASSIGN_OR_RETURN(CallContext caller, auth_->Authenticate(value));
  *actor = ActorOf(caller);
  if (!caller.admin()) {
    return Status::PermissionDenied(std::string(what) + ": requires an admin");
  }
  return caller;
}

Status EnrollService::Admit() const {
  return audit_ == nullptr ? Status::Ok() : audit_->AdmitMutation();
}

grpc::ServerUnaryReactor* EnrollService::Answer(grpc::CallbackServerContext* ctx,
                                                const AuditActor& actor, std::string verb,
                                                std::string resource, const Status& status,
                                                std::string message) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (audit_ == nullptr) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  AuditEntry e;
  e.time_us = SystemClock::Get()->NowMicros();
  e.actor = actor;
  e.verb = std::move(verb);
  e.resource = std::move(resource);
  e.code = status.code();
  e.message = message.empty() ? status.message() : std::move(message);
  e.request_id = RequestIdOr("");
  e.source = ctx->peer();
  audit_->Record(std::move(e), /*must_keep=*/true,
                 [reactor, st = ToGrpcStatus(status)] { reactor->Finish(st); });
  return reactor;
}

grpc::ServerUnaryReactor* EnrollService::Join(grpc::CallbackServerContext* ctx,
                                              const v1::JoinRequest* req, v1::JoinResponse* resp) {
  JoinCredential how;
  Result<IssuedCert> c = ids_->Join(req->token(), req->node_name(), req->csr_pem(), &how);
  if (c.ok()) Fill(*c, resp);
  AuditActor actor;
  actor.key_id = how.key_id;
  actor.principal = "node:" + req->node_name();
  return Answer(ctx, actor, "Join", "node/" + req->node_name(), c.status(),
                c.ok() ? "enrolled with " + how.key_id : "");
}

grpc::ServerUnaryReactor* EnrollService::CreateJoinToken(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateJoinTokenRequest* req,
                                                         v1::CreateJoinTokenResponse* resp) {
  AuditActor actor;
  Result<CallContext> caller = Admin(ctx, "create join token", &actor);
  if (!caller.ok()) return Answer(ctx, actor, "CreateJoinToken", "join-tokens", caller.status());
  auto refuse = [&](const std::string& why) {
    return Answer(ctx, actor, "CreateJoinToken", "join-tokens", Status::InvalidArgument(why));
  };
  if (req->ttl_seconds() < 0 || req->ttl_seconds() > kMaxTokenTtlS) {
    return refuse("ttl_seconds: must be 0 (24 hours) to " + std::to_string(kMaxTokenTtlS) +
                  " (365 days), got " + std::to_string(req->ttl_seconds()));
  }
  if (req->max_uses() < 0) {
    return refuse("max_uses: must be 0 (unlimited) or more, got " +
                  std::to_string(req->max_uses()));
  }
  if (req->note().size() > 256) return refuse("note: at most 256 characters");
  if (Status admit = Admit(); !admit.ok()) {
    return Answer(ctx, actor, "CreateJoinToken", "join-tokens", admit);
  }
  JoinTokenRecord record;
  record.note = req->note();
  record.created_by = caller->key_id;
  record.max_uses = req->max_uses();
  const int64_t ttl_s = req->ttl_seconds() == 0 ? kDefaultTokenTtlS : req->ttl_seconds();
  Result<std::string> token = ids_->CreateJoinToken(&record, ttl_s * 1000);
  if (!token.ok()) return Answer(ctx, actor, "CreateJoinToken", "join-tokens", token.status());
  Fill(record, ids_->NowMs(), resp->mutable_join_token());
  resp->set_token(*token);
  return Answer(ctx, actor, "CreateJoinToken", "join-token/" + record.id, Status::Ok(),
                "expires in " + std::to_string(ttl_s) + " s, " +
                    (record.max_uses == 0 ? std::string("unlimited uses")
                                          : std::to_string(record.max_uses) + " uses"));
}

grpc::ServerUnaryReactor* EnrollService::ListJoinTokens(grpc::CallbackServerContext* ctx,
                                                        const v1::ListJoinTokensRequest*,
                                                        v1::ListJoinTokensResponse* resp) {
  AuditActor actor;
  Result<CallContext> caller = Admin(ctx, "list join tokens", &actor);
  if (!caller.ok()) return Answer(ctx, actor, "ListJoinTokens", "join-tokens", caller.status());
  Result<std::vector<JoinTokenRecord>> all = ids_->ListJoinTokens();
  if (!all.ok()) return Finish(ctx, all.status());
  const int64_t now = ids_->NowMs();
  for (const JoinTokenRecord& t : *all) Fill(t, now, resp->add_join_tokens());
  return Finish(ctx, Status::Ok());
}

grpc::ServerUnaryReactor* EnrollService::RevokeJoinToken(grpc::CallbackServerContext* ctx,
                                                         const v1::RevokeJoinTokenRequest* req,
                                                         v1::RevokeJoinTokenResponse*) {
  AuditActor actor;
  Result<CallContext> caller = Admin(ctx, "revoke join token", &actor);
  const std::string resource = "join-token/" + req->id();
  if (!caller.ok()) return Answer(ctx, actor, "RevokeJoinToken", resource, caller.status());
  if (Status admit = Admit(); !admit.ok()) {
    return Answer(ctx, actor, "RevokeJoinToken", resource, admit);
  }
  return Answer(ctx, actor, "RevokeJoinToken", resource, ids_->RevokeJoinToken(req->id()));
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
  AuditActor actor;
  Result<CallContext> caller = Admin(ctx, "revoke node", &actor);
  const std::string resource = "node/" + req->node_name();
  if (!caller.ok()) return Answer(ctx, actor, "RevokeNode", resource, caller.status());
  if (Status admit = Admit(); !admit.ok()) return Answer(ctx, actor, "RevokeNode", resource, admit);
  Status s = ids_->Revoke(req->node_name());
  if (s.ok() && on_revoke_) on_revoke_(req->node_name());
  return Answer(ctx, actor, "RevokeNode", resource, s);
}

}  // namespace gpupool::api::tls
