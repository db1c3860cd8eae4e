#include "api/grpc/standby_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>

#include "api/client/leader_follow.h"
#include "api/grpc/listener.h"
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
  // The ports' accept loops and their way into the server; stopped before the server.
  std::unique_ptr<grpcface::GrpcListener> main_listener GPUPOOL_GUARDED_BY(mu);
  std::unique_ptr<grpcface::GrpcListener> tls_listener GPUPOOL_GUARDED_BY(mu);
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> main_acceptor
      GPUPOOL_GUARDED_BY(mu);
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tls_acceptor
      GPUPOOL_GUARDED_BY(mu);
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
  // The same accept loops as the leader's server (api/grpc/grpc_server.cc), so the limits and
  // the recovery from descriptor exhaustion hold on a standby too.
  auto bind = [&](const std::string& address, const char* name) {
    return grpcface::GrpcListener::Bind(
        address, {.name = name,
                  .max_connections_per_client = s.options.max_connections_per_client,
                  .max_connections = s.options.max_connections,
                  // Silent that long: closed by the listener before gRPC's own handshake timeout.
                  .greeting_timeout = s.options.handshake_timeout});
  };
  GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<grpcface::GrpcListener> main_listener,
                           bind(s.listen_address, "standby gRPC"));
  std::unique_ptr<grpcface::GrpcListener> tls_listener;
  if (s.options.tls) {
    GPUPOOL_ASSIGN_OR_RETURN(tls_listener, bind(s.options.tls->listen_address, "standby gRPC TLS"));
  }
  grpc::ServerBuilder builder;
  using ConnectionType = grpc::ServerBuilder::experimental_type::ExternalConnectionType;
  auto main_acceptor = builder.experimental().AddExternalConnectionAcceptor(
      ConnectionType::FROM_FD, CredentialsOf(s.options.main_tls));
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tls_acceptor;
  if (s.options.tls) {
    tls_acceptor = builder.experimental().AddExternalConnectionAcceptor(
        ConnectionType::FROM_FD, CredentialsOf(s.options.tls));
  }
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(s.options.handshake_timeout.count()));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(s.options.idle_timeout.count()));
  builder.RegisterCallbackGenericService(&s.service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Status::Internal("standby gRPC server: could not be started");
  // Handed over between the server's start and its shutdown only (as in GrpcServer).
  auto handoff = [](grpc::experimental::ExternalConnectionAcceptor* acceptor) {
    return [acceptor](int listener_fd, int fd, std::string opening) {
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
      p.listener_fd = listener_fd;
      p.fd = fd;
      if (!opening.empty()) {  // the bytes the listener read: the handshake starts from them
        grpc::Slice slice(opening);
        p.read_buffer = grpc::ByteBuffer(&slice, 1);
      }
      acceptor->HandleNewConnection(&p);
    };
  };
  main_listener->Start(handoff(main_acceptor.get()));
  if (tls_listener) tls_listener->Start(handoff(tls_acceptor.get()));
  s.server = std::move(server);
  s.port = main_listener->port();
  s.main_listener = std::move(main_listener);
  s.tls_listener = std::move(tls_listener);
  s.main_acceptor = std::move(main_acceptor);
  s.tls_acceptor = std::move(tls_acceptor);
  LogInfo("api.grpc", "standby: answering with the leader's address",
          {{"address", s.listen_address}, {"port", std::to_string(s.port)}});
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
  // No connection may be handed to a server that is shutting down (it would leak).
  s.main_listener->Stop();
  if (s.tls_listener) s.tls_listener->Stop();
  // Every call is answered at once, so there is nothing to wait for.
  s.server->Shutdown(std::chrono::system_clock::now());
  s.server->Wait();
  s.server.reset();
  s.main_listener.reset();
  s.tls_listener.reset();
}

}  // namespace gpupool::api
