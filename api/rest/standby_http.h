// HttpStandbyServer: what a gpupoold standby serves on its HTTP port while another replica leads
// (docs/ha.md, "Clients and agents follow the leader"). It executes nothing and asks for no
// credential; it reveals only the leader's advertised addresses:
//
//   GET /healthz          200 {"status":"ok","role":"standby"}   (the process is alive)
//   GET /readyz           503 {"ready":false,"role":"standby","leader":…,"leader_http":…}
//                         (not ready: a load balancer sends nothing here)
//   GET /metrics          503 (a standby has no scheduler metrics; scrape the leader)
//   anything else         307 Location: LEADER_HTTP + the same path and query, with
//                         Gpupool-Leader: LEADER_HTTP — or 503 with Retry-After: 1 while no
//                         replica leads. The body is the REST error shape (code 14, UNAVAILABLE).
//
// 307 keeps the method and body, so `curl -L` and most HTTP clients follow it. Each connection
// serves one request and closes; a request must arrive within 10 s.
//
// Thread safety: SetLeader from any thread; Start and Shutdown from one controlling thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace gpupool::api {

class HttpStandbyServer {
 public:
  // Empty cert/key: plain HTTP (--insecure), as HttpServer.
  HttpStandbyServer(std::string listen_address, std::string tls_cert_pem, std::string tls_key_pem);
  ~HttpStandbyServer();  // Shutdown()
  HttpStandbyServer(const HttpStandbyServer&) = delete;
  HttpStandbyServer& operator=(const HttpStandbyServer&) = delete;

  Status Start();
  // The leader's gRPC address and REST base URL ("" when no replica leads).
  void SetLeader(const std::string& grpc_address, const std::string& http_url);
  // Idempotent; the port is free when it returns.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
