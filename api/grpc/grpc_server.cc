#include "api/grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <mutex>

#include "api/grpc/health_service.h"
#include "api/grpc/listener.h"
#include "api/grpc/metrics_interceptor.h"
#include "api/grpc/parse_error_interceptor.h"
#include "api/grpc/services.h"
#include "base/log.h"

namespace gpupool::api {

struct GrpcServer::Impl {
  Impl(ApiService& service, const Authenticator& auth, std::string address, GrpcServerOptions o)
      : listen_address(std::move(address)),
        options(std::move(o)),
        audit_hook(options.audit),
        jobs({&service, &auth, &streams, &audit_hook}),
        pools({&service, &auth, &streams, &audit_hook}),
        nodes({&service, &auth, &streams, &audit_hook}),
        catalog({&service, &auth, &streams, &audit_hook}),
        tenants({&service, &auth, &streams, &audit_hook}),
        audit({&service, &auth, &streams, &audit_hook}),
        usage({&service, &auth, &streams, &audit_hook}),
        whatif({&service, &auth, &streams, &audit_hook}),
        services({&service, &auth, &streams, &audit_hook}),
        keys({&service, &auth, &streams, &audit_hook}),
        webhooks({&service, &auth, &streams, &audit_hook}),
        billing({&service, &auth, &streams, &audit_hook}),
        health(service) {}

  const std::string listen_address;
  GrpcServerOptions options;
  grpcface::StreamTracker streams;
  const AuditHook audit_hook;
  grpcface::JobServiceImpl jobs;
  grpcface::PoolServiceImpl pools;
  grpcface::NodeServiceImpl nodes;
  grpcface::CatalogServiceImpl catalog;
  grpcface::TenantServiceImpl tenants;
  grpcface::AuditServiceImpl audit;
  grpcface::UsageServiceImpl usage;
  grpcface::WhatIfServiceImpl whatif;
  grpcface::ServiceServiceImpl services;
  grpcface::KeyServiceImpl keys;
  grpcface::WebhookServiceImpl webhooks;
  grpcface::BillingServiceImpl billing;
  grpcface::HealthService health;  // grpc.health.v1, unauthenticated like /readyz

  std::mutex mu;                         // serialises Start() and Shutdown()
  std::unique_ptr<grpc::Server> server;  // guarded by mu
  // The ports' accept loops and their way into the server; stopped before the server.
  std::unique_ptr<grpcface::GrpcListener> main_listener;  // guarded by mu
  std::unique_ptr<grpcface::GrpcListener> tls_listener;   // guarded by mu
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> main_acceptor;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tls_acceptor;
  int port = 0;            // written under mu before serving
  int tls_port = 0;        // likewise
  bool shut_down = false;  // guarded by mu
};

GrpcServer::GrpcServer(ApiService& service, const Authenticator& auth, std::string listen_address,
                       GrpcServerOptions options)
    : impl_(std::make_unique<Impl>(service, auth, std::move(listen_address), std::move(options))) {}

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::AddService(grpc::Service* service) {
  impl_->options.extra_services.push_back(service);
}

Status GrpcServer::Start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.server || s.shut_down) return Status::FailedPrecondition("gRPC server: already started");

  // Server reflection (grpcurl list/describe): the API's schema is public (docs/openapi.yaml);
  // calling a method still needs a credential.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // A client certificate is requested and, when sent, verified against the CA (agents send
  // theirs); API clients authenticate with a bearer credential instead.
  auto tls_credentials = [](const GrpcTlsPort& tls) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = tls.client_ca_pem;
    ssl.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
    return grpc::SslServerCredentials(ssl);
  };
  // Our own accept loops (api/grpc/listener.h); gRPC gets each connection through an acceptor.
  auto bind = [&](const std::string& address, const char* name) {
    return grpcface::GrpcListener::Bind(
        address, {.name = name,
                  .max_connections_per_client = s.options.max_connections_per_client,
                  .max_connections = s.options.max_connections,
                  // Silent that long: closed by the listener before gRPC's own handshake timeout.
                  .greeting_timeout = s.options.handshake_timeout});
  };
  Result<std::unique_ptr<grpcface::GrpcListener>> main_listener = bind(s.listen_address, "gRPC");
  if (!main_listener.ok()) return main_listener.status();
  std::unique_ptr<grpcface::GrpcListener> tls_listener;
  if (s.options.tls) {
    Result<std::unique_ptr<grpcface::GrpcListener>> l =
        bind(s.options.tls->listen_address, "gRPC TLS");
    if (!l.ok()) return l.status();
    tls_listener = std::move(l).value();
  }
  using ConnectionType = grpc::ServerBuilder::experimental_type::ExternalConnectionType;
  auto main_acceptor = builder.experimental().AddExternalConnectionAcceptor(
      ConnectionType::FROM_FD, s.options.main_tls ? tls_credentials(*s.options.main_tls)
                                                  : grpc::InsecureServerCredentials());
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tls_acceptor;
  if (s.options.tls) {
    tls_acceptor = builder.experimental().AddExternalConnectionAcceptor(
        ConnectionType::FROM_FD, tls_credentials(*s.options.tls));
  }
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(s.options.handshake_timeout.count()));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(s.options.idle_timeout.count()));
  builder.SetMaxReceiveMessageSize(s.options.max_receive_message_bytes);
  builder.RegisterService(&s.jobs);
  builder.RegisterService(&s.pools);
  builder.RegisterService(&s.nodes);
  builder.RegisterService(&s.catalog);
  builder.RegisterService(&s.tenants);
  builder.RegisterService(&s.audit);
  builder.RegisterService(&s.usage);
  builder.RegisterService(&s.whatif);
  builder.RegisterService(&s.services);
  builder.RegisterService(&s.keys);
  builder.RegisterService(&s.webhooks);
  builder.RegisterService(&s.billing);
  builder.RegisterService(&s.health);
  for (grpc::Service* extra : s.options.extra_services) builder.RegisterService(extra);
  // The parse-error rewrite comes first, so the metrics count the code the client receives.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<grpcface::ParseErrorInterceptorFactory>());
  if (s.options.metrics) {
    creators.push_back(std::make_unique<grpcface::MetricsInterceptorFactory>(*s.options.metrics));
  }
  builder.experimental().SetInterceptorCreators(std::move(creators));

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Status::Internal("gRPC server: could not be started");
  // Handed over between the server's start and its shutdown only: an acceptor outside that
  // window neither serves nor closes the descriptor.
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
  (*main_listener)->Start(handoff(main_acceptor.get()));
  if (tls_listener) tls_listener->Start(handoff(tls_acceptor.get()));
  s.server = std::move(server);
  s.port = (*main_listener)->port();
  s.tls_port = tls_listener ? tls_listener->port() : 0;
  s.main_listener = std::move(main_listener).value();
  s.tls_listener = std::move(tls_listener);
  s.main_acceptor = std::move(main_acceptor);
  s.tls_acceptor = std::move(tls_acceptor);
  LogInfo("api.grpc", "listening",
          {{"address", s.listen_address}, {"port", std::to_string(s.port)}});
  return Status::Ok();
}

int GrpcServer::port() const {
  std::lock_guard lock(impl_->mu);
  return impl_->port;
}

int GrpcServer::tls_port() const {
  std::lock_guard lock(impl_->mu);
  return impl_->tls_port;
}

void GrpcServer::Shutdown() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mu);
  if (s.shut_down) return;
  s.shut_down = true;
  // Streams (WatchJob with no end in sight) would hold Shutdown for the whole grace: end them.
  s.streams.AbortAll(Status::Unavailable("the server is shutting down"));
  if (!s.server) return;
  // No connection may be handed to a server that is shutting down (it would leak).
  s.main_listener->Stop();
  if (s.tls_listener) s.tls_listener->Stop();
  s.server->Shutdown(std::chrono::system_clock::now() + s.options.shutdown_grace);
  s.server->Wait();
  s.server.reset();
  LogInfo("api.grpc", "stopped", {{"address", s.listen_address}});
}

}  // namespace gpupool::api
