// GrpcServer: gpupoold's gRPC face. Serves JobService, PoolService, NodeService, CatalogService,
// TenantService and AuditService over an ApiService, plus any extra services the daemon registers
// on the same port (the agent stream service), the standard health service (grpc.health.v1,
// answering what /readyz answers) and server reflection (so grpcurl can list and describe the API).
//
//   GrpcServer grpc(api, auth, "0.0.0.0:7070", {.metrics = registry});
//   grpc.AddService(&agent_service);     // before Start()
//   Status st = grpc.Start();            // grpc.port() is the bound port ("…:0" picks one)
//   …
//   grpc.Shutdown();                     // ends streams, lets unary calls finish (grace), stops
//
// gpupoold binds and accepts on its ports itself (api/grpc/listener.h) and hands each connection
// to gRPC: a port that runs out of descriptors pauses and serves again when they come back (gRPC's
// own listener never accepts again after one EMFILE), and one client address holds at most
// `max_connections_per_client` connections per port. Port reuse is off, so a port held by
// another process is an error from Start(), not a silently shared port.
//
// Thread safety: Start() and Shutdown() from one controlling thread; the ApiService, the
// Authenticator, the extra services and the registry must outlive the server.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/audit.h"
#include "api/auth.h"
#include "api/service.h"
#include "base/status.h"

namespace grpc {
class Service;
}
namespace prometheus {
class Registry;
}

namespace gpupool::api {

// A second listening port that serves every service over TLS, requesting a client certificate
// and verifying it against `client_ca_pem` when one is sent (agents authenticate with theirs;
// API clients may send none). The calls' auth context carries the verified certificate.
struct GrpcTlsPort {
  std::string listen_address;
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;
};

struct GrpcServerOptions {
  // Registered beside the API services, e.g. the agent stream service. Not owned.
  std::vector<grpc::Service*> extra_services;
  // Where request metrics go (gpupool_grpc_requests_total, …); null = no request metrics.
  std::shared_ptr<prometheus::Registry> metrics;
  // Largest request message accepted.
  int max_receive_message_bytes = 4 * 1024 * 1024;
  // A connection that has not finished its HTTP/2 (and TLS) handshake this long after connecting
  // is closed, so idle half-open connections cannot pile up (gRPC's default is 120 s).
  std::chrono::milliseconds handshake_timeout{10'000};
  // A connection with no call in flight this long is closed (clients reconnect on demand; agent
  // streams and watches are calls in flight, so they stay).
  std::chrono::milliseconds idle_timeout{15 * 60'000};
  // Open connections one client address may hold on each port; past it a new connection is
  // closed before a byte is read (`listen.grpc_max_connections_per_client`). 0 = no limit.
  size_t max_connections_per_client = 256;
  // Open connections each port may hold in all; past it a new one closes the connection that has
  // been silent the longest, or is refused (api/grpc/listener.h). 0 = no limit.
  size_t max_connections = 0;
  // Also serve on this TLS port; unset = no second port.
  std::optional<GrpcTlsPort> tls;
  // Where audit records go (api/audit.h); null = no audit. Not owned; must outlive the server.
  AuditSink* audit = nullptr;
  // Serve the main listen address over TLS with these credentials (its listen_address is
  // ignored): the secure default. Unset = the main port is plaintext (--insecure, loopback only).
  std::optional<GrpcTlsPort> main_tls;
  // How long Shutdown() lets in-flight unary calls finish before cancelling them.
  std::chrono::milliseconds shutdown_grace{2000};
};

class GrpcServer {
 public:
  GrpcServer(ApiService& service, const Authenticator& auth, std::string listen_address,
             GrpcServerOptions options = {});
  ~GrpcServer();  // Shutdown()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // REQUIRES: before Start(). Not owned; must outlive the server.
  void AddService(grpc::Service* service);

  // Binds and starts serving. UNAVAILABLE naming the address when it cannot be bound (in use,
  // not a valid host:port, permission), FAILED_PRECONDITION when already started.
  Status Start();

  // The bound port after a successful Start(); 0 before.
  int port() const;
  // The bound TLS port (GrpcServerOptions::tls); 0 when none.
  int tls_port() const;

  // Ends open streams with UNAVAILABLE, waits up to shutdown_grace for unary calls, cancels the
  // rest and returns once every handler is done. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
