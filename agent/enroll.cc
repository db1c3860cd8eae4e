#include "agent/enroll.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "api/client/leader_follow.h"
#include "base/address_list.h"
#include "base/log.h"
#include "base/tls/pki.h"
#include "gpupool/v1/agent.grpc.pb.h"

namespace gpupool::agent {
namespace {

constexpr std::chrono::seconds kCallTimeout{30};

Result<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(s.error_code()), what + ": " + s.error_message());
}

// Join and Renew go to the leader among `scheduler`'s replicas (one address or a list, as for
// the agent stream; docs/ha.md): a standby's NotLeader is followed (it proves the call was not
// executed, so sending it again is safe), within kCallTimeout in all.
grpc::Status CallLeader(
    const std::string& scheduler, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::function<grpc::Status(v1::NodeEnrollService::Stub&, grpc::ClientContext*)>& call) {
  api::LeaderFollower follower(scheduler, [&credentials](const std::string& target) {
    grpc::ChannelArguments args;  // a list: the name every replica's certificate carries
    if (!TlsTargetNameOf(target).empty()) args.SetSslTargetNameOverride(TlsTargetNameOf(target));
    return grpc::CreateCustomChannel(GrpcTargetOf(target), credentials, args);
  });
  const auto end = std::chrono::system_clock::now() + kCallTimeout;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(end);
    auto stub = v1::NodeEnrollService::NewStub(follower.channel());
    grpc::Status st = call(*stub, &ctx);
    if (st.ok()) return st;
    const api::LeaderFollower::Next next = follower.OnFailure(st);
    if (!next.retry || std::chrono::system_clock::now() + next.delay >= end) return st;
    std::this_thread::sleep_for(next.delay);
  }
}

// Saves a new key and certificate; the key first, so the pair on disk is never a new
// certificate with an old key for longer than one rename.
Status Save(const NodeCertPaths& p, const std::string& key_pem, const v1::JoinResponse& r) {
  GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(p.key, key_pem));
  GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(p.cert, r.cert_pem()));
  return Status::Ok();
}

bool Due(const tls::CertInfo& info) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  const int64_t life = info.not_after_s - info.not_before_s;
  return now >= info.not_after_s - life / 3;
}

Status Join(const AgentConfig& config, const NodeCertPaths& p, const std::string& ca_pem) {
  GPUPOOL_ASSIGN_OR_RETURN(tls::KeyAndCsr kc, tls::NewKeyAndCsr(config.node_name));
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem;
  v1::JoinRequest req;
  req.set_node_name(config.node_name);
  req.set_token(config.token);
  req.set_csr_pem(kc.csr_pem);
  v1::JoinResponse resp;
  GPUPOOL_RETURN_IF_ERROR(
      FromGrpc(CallLeader(config.scheduler, grpc::SslCredentials(o),
                          [&](v1::NodeEnrollService::Stub& stub, grpc::ClientContext* ctx) {
                            return stub.Join(ctx, req, &resp);
                          }),
               "join"));
  GPUPOOL_RETURN_IF_ERROR(Save(p, kc.key_pem, resp));
  LogInfo("agent.enroll", "joined; node certificate saved", {{"node", config.node_name}});
  return Status::Ok();
}

Status Renew(const AgentConfig& config, const NodeCertPaths& p, const std::string& ca_pem) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string key, Slurp(p.key));
  GPUPOOL_ASSIGN_OR_RETURN(std::string cert, Slurp(p.cert));
  GPUPOOL_ASSIGN_OR_RETURN(tls::KeyAndCsr kc, tls::NewKeyAndCsr(config.node_name));
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem;
  o.pem_private_key = key;
  o.pem_cert_chain = cert;
  v1::RenewRequest req;
  req.set_csr_pem(kc.csr_pem);
  v1::JoinResponse resp;
  GPUPOOL_RETURN_IF_ERROR(
      FromGrpc(CallLeader(config.scheduler, grpc::SslCredentials(o),
                          [&](v1::NodeEnrollService::Stub& stub, grpc::ClientContext* ctx) {
                            return stub.Renew(ctx, req, &resp);
                          }),
               "renew"));
  GPUPOOL_RETURN_IF_ERROR(Save(p, kc.key_pem, resp));
  LogInfo("agent.enroll", "node certificate renewed", {{"node", config.node_name}});
  return Status::Ok();
}

}  // namespace

NodeCertPaths NodeCertPathsOf(const AgentConfig& config) {
  const std::string dir = config.data_dir + "/tls";
  return {dir, dir + "/node.key", dir + "/node.crt", dir + "/ca.crt"};
}

Status EnsureNodeCertificate(const AgentConfig& config) {
  const NodeCertPaths p = NodeCertPathsOf(config);
  std::error_code ec;
  std::filesystem::create_directories(p.dir, ec);
  if (ec) return Status::Internal(p.dir + ": " + ec.message());
  std::filesystem::permissions(p.dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  GPUPOOL_ASSIGN_OR_RETURN(std::string ca_pem, Slurp(config.ca_file));
  GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(p.ca, ca_pem));
  Result<std::string> cert = Slurp(p.cert);
  if (!cert.ok() || !std::filesystem::exists(p.key)) return Join(config, p, ca_pem);
  Result<tls::CertInfo> info = tls::ParseCert(*cert);
  if (!info.ok() || info->common_name != config.node_name) return Join(config, p, ca_pem);
  if (Due(*info)) return Renew(config, p, ca_pem);
  return Status::Ok();
}

Result<bool> RenewIfDue(const AgentConfig& config) {
  const NodeCertPaths p = NodeCertPathsOf(config);
  GPUPOOL_ASSIGN_OR_RETURN(std::string cert, Slurp(p.cert));
  GPUPOOL_ASSIGN_OR_RETURN(tls::CertInfo info, tls::ParseCert(cert));
  if (!Due(info)) return false;
  GPUPOOL_ASSIGN_OR_RETURN(std::string ca_pem, Slurp(p.ca));
  GPUPOOL_RETURN_IF_ERROR(Renew(config, p, ca_pem));
  return true;
}

grpc::ChannelArguments AgentChannelArgs(const AgentConfig& config, bool own_connection) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect.initial_ms));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect.initial_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(config.reconnect.max_ms));
  if (config.keepalive_ms > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(config.keepalive_ms));
  }
  if (own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> MakeTlsAgentChannel(const AgentConfig& config, bool own_connection) {
  const NodeCertPaths p = NodeCertPathsOf(config);
  // Files re-read every minute: a renewed certificate is picked up by the next handshake.
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(p.key, p.cert, p.ca, 60);
  grpc::experimental::TlsChannelCredentialsOptions o;
  o.set_certificate_provider(provider);
  o.watch_root_certs();
  o.watch_identity_key_cert_pairs();
  grpc::ChannelArguments args = AgentChannelArgs(config, own_connection);
  // Several replicas: the name all their certificates carry (base/address_list.h).
  const std::string name = TlsTargetNameOf(config.scheduler);
  if (!name.empty()) args.SetSslTargetNameOverride(name);
  return grpc::CreateCustomChannel(GrpcTargetOf(config.scheduler),
                                   grpc::experimental::TlsCredentials(o), args);
}

}  // namespace gpupool::agent
