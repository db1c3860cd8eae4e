// Gateway: the services' HTTP front door (docs/services.md, "The gateway"). It routes
// /services/<tenant>/<name>/… to the service's ready replicas and reports what it sees of each
// service's load to the autoscaler — the only signal it scales on.
//
//  * **Routing.** Least outstanding requests among the replicas that passed their readiness
//    check (api/gateway/route.h). A replica the directory reports RUNNING is probed — an HTTP GET
//    of its readiness path, 2xx, or a TCP connect when it has none — every `probe_interval`
//    until it passes; one whose connection fails is probed again before it gets more work.
//  * **Holding.** A request that finds no ready replica (a service scaled to zero, or all
//    loading) is held, not refused: it counts as queued, which asks the autoscaler for a
//    replica at once, and it is sent as soon as one is ready. It waits at most `hold_timeout`;
//    then it is answered 503 with Retry-After and the reason the service is short (quota,
//    capacity, failing replicas). Its wait is the cold start, reported to the directory.
//  * **Retries.** A request whose replica could not be reached is sent to another; one whose
//    replica failed after it was sent is sent again only when its method is idempotent (GET,
//    HEAD, PUT, DELETE, OPTIONS), at most `max_attempts` in all; otherwise 502.
//  * **Callers.** With an Authenticator, each request carries `Authorization: Bearer <key>` of
//    the service's tenant or a tenant above it (any role), or an admin's; the header is not
//    passed on to the replica. A RateLimiter limits requests per tenant organisation (429).
//  * **Connections.** Connections to replicas are kept alive and reused, newest first, while
//    idle under 1 s (at most 64 per replica); one the replica closed as it was reused costs an
//    idempotent request a second send on a new connection, never a 502.
//  * **Load.** Every `report_interval`, per service: requests in flight, held, arrivals per
//    second and the mean time replicas took per request (ServiceLoadSample).
//
//  * **HTTP/2.** Negotiated by ALPN over TLS, or h2c with prior knowledge on a plain port;
//    each stream goes through the same route, key check, rate limit, holding and retry rule
//    (api/gateway/h2_server.h). gRPC calls (content-type application/grpc) go to replicas over
//    h2c, trailers kept (api/gateway/h2_upstream.h); other HTTP/2 requests over HTTP/1.1. A
//    client that cannot put the service in its path (gRPC) names it in `gpupool-service`.
//
// HTTP/1.1 with keep-alive and HTTP/2 over TLS (the daemon's server certificate), bodies buffered
// (at most `max_body_bytes`), on one thread of its own (an Asio io_context with C++20
// coroutines); every socket has a deadline. Built on Boost.Beast and nghttp2 because gpupoold
// already serves REST with Beast and the gateway must hold requests and feed the autoscaler
// in-process, which a separate proxy process cannot do without a second control channel.
//
// Thread safety: Start/Stop from one thread; the rest runs on the gateway's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "api/gateway/directory.h"
#include "base/status.h"

namespace prometheus {
class Registry;
}

namespace gpupool::api {
class Authenticator;
class RateLimiter;
}  // namespace gpupool::api

namespace gpupool::api::gateway {

struct GatewayOptions {
  std::string listen = "127.0.0.1:0";
  std::chrono::milliseconds hold_timeout{60'000};
  std::chrono::milliseconds request_timeout{300'000};  // a replica's answer, once sent
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds probe_interval{250};
  std::chrono::milliseconds refresh_interval{200};  // the directory read again
  std::chrono::milliseconds report_interval{250};
  int max_attempts = 3;
  int64_t max_body_bytes = 64 << 20;
  // The server certificate chain and key (PEM) clients see; empty: plain HTTP (--insecure).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  const Authenticator* auth = nullptr;            // null: no authentication (tests, --insecure)
  RateLimiter* limiter = nullptr;                 // null: no rate limit
  std::shared_ptr<prometheus::Registry> metrics;  // null: none
};

class Gateway {
 public:
  // REQUIRES: `directory` (and the options' pointers) outlive the gateway.
  Gateway(Directory* directory, GatewayOptions options);
  ~Gateway();  // Stop()s
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds and starts serving; FAILED_PRECONDITION naming the address when it cannot bind.
  Status Start();
  void Stop();
  int port() const;  // the bound port, after Start

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api::gateway
