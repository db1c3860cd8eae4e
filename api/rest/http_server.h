// HttpServer: gpupoold's HTTP face — the REST API (routes.h) plus /healthz, /readyz and /metrics
// — on Boost.Beast, all on one port.
//
//   HttpServer http(api, auth, registry, "0.0.0.0:8080");
//   Status st = http.Start();     // http.port() is the bound port ("…:0" picks one)
//   …
//   http.Shutdown();              // fast: stops accepting, ends streams, closes connections
//
// Connections are HTTP/1.1 keep-alive, one request at a time each, read with bounded header and
// body sizes (431 / 413 beyond them) and closed after `idle_timeout` without a request. Work runs
// on `io_threads` threads; ApiService replies arrive on any thread and are posted back to the
// connection. Request metrics go into `registry`, one place for every route:
//   gpupool_http_requests_total{method,route,code},
//   gpupool_http_request_duration_seconds{method,route}
// where `route` is the matched pattern ("/v1/jobs/{job_id}") or "unmatched".
//
// Thread safety: Start() and Shutdown() from one controlling thread; the ApiService, the
// Authenticator and the registry must outlive the server.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "api/audit.h"
#include "api/auth.h"
#include "api/rest/console.h"
#include "api/service.h"
#include "base/status.h"

namespace prometheus {
class Registry;
}

namespace gpupool::api {

struct HttpServerOptions {
  size_t max_body_bytes = 1024 * 1024;  // larger bodies get 413
  size_t max_header_bytes = 16 * 1024;  // larger request heads get 431
  // A connection that sends no (complete) request for this long is closed.
  std::chrono::milliseconds idle_timeout{60'000};
  // A response write that makes no progress for this long closes the connection.
  std::chrono::milliseconds write_timeout{30'000};
  // Output a streaming client may fall behind by before its stream is dropped.
  size_t max_stream_backlog_bytes = 8 * 1024 * 1024;
  int io_threads = 2;
  // Open connections one client address may hold; past it a new connection is closed at once,
  // so one client's idle connections cannot take every descriptor (docs/security.md). 0 = no
  // limit.
  size_t max_connections_per_client = 256;
  // Open connections in all; past it a new connection closes the one that has waited longest
  // for a request (idle, or still in its TLS handshake), or is refused when every one has a
  // request in hand. With the gRPC ports' own caps this keeps descriptors for PostgreSQL and
  // the other ports however many clients connect (docs/security.md). 0 = no limit.
  size_t max_connections = 0;
  // The console's single sign-on (api/rest/console.h); null = tokens only.
  rest::ConsoleSignInSource console_sign_in;
  // Where audit records go (api/audit.h); null = no audit. Not owned; must outlive the server.
  AuditSink* audit = nullptr;
  // How long Shutdown() lets requests already handed to the ApiService get their replies.
  std::chrono::milliseconds shutdown_grace{1000};
  // Serve HTTPS with this certificate chain and key (PEM): the secure default. Empty = plain
  // HTTP (--insecure, loopback only). The TLS handshake must finish within idle_timeout.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

class HttpServer {
 public:
  // `registry` serves /metrics and receives the request metrics; null = an empty /metrics.
  HttpServer(ApiService& service, const Authenticator& auth,
             std::shared_ptr<prometheus::Registry> registry, std::string listen_address,
             HttpServerOptions options = {});
  ~HttpServer();  // Shutdown()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds "host:port" and starts serving. UNAVAILABLE naming the address and the OS error when
  // it cannot (e.g. "Address already in use"); FAILED_PRECONDITION when already started.
  Status Start();

  // The bound port after a successful Start(); 0 before.
  int port() const;

  // Stops accepting, ends streams and idle connections at once, gives requests in flight up to
  // shutdown_grace for their replies, then closes everything and joins the io threads.
  // Idempotent.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
