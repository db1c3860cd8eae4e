#include "api/grpc/standby_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>

#include "api/client/leader_follow.h"
#include "base/log.h"
#include "base/mutex.h"

namespace gpupool::api {

namespace {

// Answers every method of every service with the standby's NotLeader, before reading anything.
class NotLeaderService final : public grpc::CallbackGenericService {
 public:
  void SetLeader(const v1::NotLeader& hint) {
    MutexLock lock(&mu_);
    hint_ = hint;
  }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    v1::NotLeader hint;
    {
      MutexLock lock(&mu_);
      hint = hint_;
    }
    std::string message =
        hint.leader_address().empty()
            ? "this gpupoold replica is a standby and no replica leads right now (a takeover is "
              "under way): retry shortly"
            : "this gpupoold replica is a standby; the leader is at " + hint.leader_address();
    if (!hint.leader_address().empty())
      ctx->AddTrailingMetadata(kLeaderTrailer, hint.leader_address());
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(grpc::Status status) { Finish(status); }
      void OnDone() override { delete this; }
    };
    return new Reactor(NotLeaderStatus(hint, message));
  }

 private:
  Mutex mu_;
  v1::NotLeader hint_ GPUPOOL_GUARDED_BY(mu_);
};

std::shared_ptr<grpc::ServerCredentials> CredentialsOf(const std::optional<GrpcTlsPort>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls->client_ca_pem;
  ssl.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

struct GrpcStandbyServer::Impl {
  std::string listen_address;
  GrpcStandbyOptions options;
  NotLeaderService service;
  Mutex mu;  // serialises Start() and Shutdown()
  std::unique_ptr<grpc::Server> server GPUPOOL_GUARDED_BY(mu);
  int port GPUPOOL_GUARDED_BY(mu) = 0;
};

GrpcStandbyServer::GrpcStandbyServer(std::string listen_address, GrpcStandbyOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->listen_address = std::move(listen_address);
  impl_->options = std::move(options);
}

GrpcStandbyServer::~GrpcStandbyServer() { Shutdown(); }

void GrpcStandbyServer::SetLeader(const v1::NotLeader& hint) { impl_->service.SetLeader(hint); }

Status GrpcStandbyServer::Start() {
  Impl& s = *impl_;
  MutexLock lock(&s.mu);
  if (s.server) return Status::FailedPrecondition("standby gRPC server: already started");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(s.listen_address, CredentialsOf(s.options.main_tls), &port);
  int tls_port = 0;
  if (s.options.tls) {
    builder.AddListeningPort(s.options.tls->listen_address, CredentialsOf(s.options.tls),
                             &tls_port);
  }
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10'000);
  builder.RegisterCallbackGenericService(&s.service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0 || (s.options.tls && tls_port == 0)) {
    if (server) server->Shutdown();
    return Status::Unavailable(
        "standby gRPC server: cannot listen on '" + s.listen_address + "'" +
        (s.options.tls ? " or '" + s.options.tls->listen_address + "'" : ""));
  }
  s.server = std::move(server);
  s.port = port;
  LogInfo("api.grpc", "standby: answering with the leader's address",
          {{"address", s.listen_address}, {"port", std::to_string(port)}});
  return Status::Ok();
}

int GrpcStandbyServer::port() const {
  MutexLock lock(&impl_->mu);
  return impl_->port;
}

void GrpcStandbyServer::Shutdown() {
  Impl& s = *impl_;
  MutexLock lock(&s.mu);
  if (!s.server) return;
  // Every call is answered at once, so there is nothing to wait for.
  s.server->Shutdown(std::chrono::system_clock::now());
  s.server->Wait();
  s.server.reset();
}

}  // namespace gpupool::api
