#include "api/grpc/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_builder.h>
#include <netdb.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "api/grpc/health_service.h"
#include "api/grpc/metrics_interceptor.h"
#include "api/grpc/parse_error_interceptor.h"
#include "api/grpc/services.h"
#include "base/log.h"

namespace gpupool::api {

namespace {

// gRPC does not say why a port could not be bound; binding it ourselves does. Returns the OS
// error ("Address already in use"), or "" when the probe cannot tell.
std::string ProbeBindError(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return "";
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "expected host:port";
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0) return gai_strerror(gai);
  std::string error;
  for (addrinfo* ai = res; ai != nullptr && error.empty(); ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(res);
  return error;
}

}  // namespace

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
        keys({&service, &auth, &streams, &audit_hook}),
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
  grpcface::KeyServiceImpl keys;
  grpcface::HealthService health;  // grpc.health.v1, unauthenticated like /readyz

  std::mutex mu;                         // serialises Start() and Shutdown()
  std::unique_ptr<grpc::Server> server;  // guarded by mu
  int port = 0;                          // written under mu before serving
  int tls_port = 0;                      // likewise
  bool shut_down = false;                // guarded by mu
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
  int bound_port = 0;
  builder.AddListeningPort(
      s.listen_address,
      s.options.main_tls ? tls_credentials(*s.options.main_tls) : grpc::InsecureServerCredentials(),
      &bound_port);
  int bound_tls_port = 0;
  if (s.options.tls) {
    builder.AddListeningPort(s.options.tls->listen_address, tls_credentials(*s.options.tls),
                             &bound_tls_port);
  }
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
  builder.RegisterService(&s.keys);
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
  if (!server || bound_port == 0) {
    if (server) server->Shutdown();
    std::string why = ProbeBindError(s.listen_address);
    if (why.empty()) why = "not a valid address to listen on";
    return Status::Unavailable("gRPC server: cannot listen on '" + s.listen_address + "': " + why);
  }
  if (s.options.tls && bound_tls_port == 0) {
    server->Shutdown();
    std::string why = ProbeBindError(s.options.tls->listen_address);
    if (why.empty()) why = "not a valid address to listen on";
    return Status::Unavailable("gRPC server: cannot listen on '" + s.options.tls->listen_address +
                               "' (TLS): " + why);
  }
  s.server = std::move(server);
  s.port = bound_port;
  s.tls_port = bound_tls_port;
  LogInfo("api.grpc", "listening",
          {{"address", s.listen_address}, {"port", std::to_string(bound_port)}});
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
  s.server->Shutdown(std::chrono::system_clock::now() + s.options.shutdown_grace);
  s.server->Wait();
  s.server.reset();
  LogInfo("api.grpc", "stopped", {{"address", s.listen_address}});
}

}  // namespace gpupool::api
