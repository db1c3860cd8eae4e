// GrpcStandbyServer: what a gpupoold standby serves on its gRPC ports while another replica leads
// (docs/ha.md, "Clients and agents follow the leader"). Every call, of every service (the API,
// the agent stream, enrolment, health), is answered at once with UNAVAILABLE carrying a
// v1::NotLeader (api/client/leader_follow.h): the leader's address as the standby last read it
// from the lease row, or none during a takeover. Nothing is read from the request, nothing is
// executed, no credential is asked for: the answer reveals only the leader's advertised address,
// which every client's address list names anyway.
//
//   GrpcStandbyServer standby("0.0.0.0:7070", options);
//   standby.Start();                      // binds; UNAVAILABLE naming the address if it cannot
//   standby.SetLeader(hint);              // after every lease poll
//   standby.Shutdown();                   // before the leader's own server binds the same ports
//
// Port reuse is off, as for GrpcServer: Shutdown() must return before the ports are bound again.
//
// Floods: a standby's ports face the same clients as the leader's, so they get the same
// protection (docs/security.md, "Connection floods exhaust descriptors"): gpupoold's own accept
// loop (api/grpc/listener.h: the port survives running out of descriptors, and one client address
// holds at most `max_connections_per_client` connections), the handshake timeout and the idle
// timeout.
//
// Thread safety: SetLeader from any thread; Start and Shutdown from one controlling thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "api/grpc/grpc_server.h"
#include "base/status.h"
#include "gpupool/v1/leader.pb.h"

namespace gpupool::api {

struct GrpcStandbyOptions {
  // The same credentials the leader's server would use on each port (GrpcServerOptions).
  std::optional<GrpcTlsPort> main_tls;
  std::optional<GrpcTlsPort> tls;
  // As GrpcServerOptions: the handshake and idle timeouts and the per-client connection limit
  // on each port (`listen.grpc_max_connections_per_client`; 0 = no limit).
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds idle_timeout{15 * 60'000};
  size_t max_connections_per_client = 256;
  size_t max_connections = 0;
};

class GrpcStandbyServer {
 public:
  GrpcStandbyServer(std::string listen_address, GrpcStandbyOptions options);
  ~GrpcStandbyServer();  // Shutdown()
  GrpcStandbyServer(const GrpcStandbyServer&) = delete;
  GrpcStandbyServer& operator=(const GrpcStandbyServer&) = delete;

  Status Start();
  // The bound main port after a successful Start() ("…:0" picks one); 0 before.
  int port() const;
  void SetLeader(const v1::NotLeader& hint);
  // Idempotent; the ports are free when it returns.
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool::api
