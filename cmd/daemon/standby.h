// StandbyFace: the ports of a gpupoold replica while it is a standby (docs/ha.md, "Clients and
// agents follow the leader"). It serves the same addresses the leader would (gRPC, the optional
// gRPC TLS port, HTTP), with the same TLS credentials, but executes nothing: gRPC answers
// UNAVAILABLE + NotLeader, REST 307 to the leader, /readyz 503 (api/grpc/standby_server.h,
// api/rest/standby_http.h). After every lease poll it learns where the leader is; once this
// replica leads and has recovered, Stop() frees the ports for the real servers.
//
// Thread safety: OnPoll from the thread that waits for the lease; Start/Stop from main.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/grpc/grpc_server.h"
#include "api/grpc/standby_server.h"
#include "api/rest/standby_http.h"
#include "cmd/daemon/config.h"
#include "scheduler/leadership.h"

namespace gpupool {

// The addresses this replica advertises with its lease: gRPC and the REST base URL.
struct AdvertisedAddresses {
  std::string grpc;
  std::string http;
};
AdvertisedAddresses AdvertisedOf(const DaemonConfig& config);

class StandbyFace {
 public:
  // `main_tls`/`tls`: as the leader's GrpcServer would serve them (unset = plaintext / no port);
  // `cert_pem`/`key_pem`: the HTTPS credentials (empty = plain HTTP).
  StandbyFace(const DaemonConfig& config, std::optional<api::GrpcTlsPort> main_tls,
              std::optional<api::GrpcTlsPort> tls, std::string cert_pem, std::string key_pem);
  Status Start();
  // What the latest lease poll said (a default claim when the database did not answer).
  void OnPoll(const LeaderClaim& claim);
  void Stop();

 private:
  api::GrpcStandbyServer grpc_;
  api::HttpStandbyServer http_;
};

}  // namespace gpupool
