#include "cmd/daemon/standby.h"

#include "base/log.h"

namespace gpupool {

AdvertisedAddresses AdvertisedOf(const DaemonConfig& config) {
  AdvertisedAddresses a;
  a.grpc = config.ha.advertise.empty() ? config.grpc_listen : config.ha.advertise;
  a.http = config.ha.advertise_http.empty()
               ? std::string(config.insecure ? "http://" : "https://") + config.http_listen
               : config.ha.advertise_http;
  return a;
}

StandbyFace::StandbyFace(const DaemonConfig& config, std::optional<api::GrpcTlsPort> main_tls,
                         std::optional<api::GrpcTlsPort> tls, std::string cert_pem,
                         std::string key_pem)
    : grpc_(config.grpc_listen, {.main_tls = std::move(main_tls),
                                 .tls = std::move(tls),
                                 .max_connections_per_client =
                                     static_cast<size_t>(config.grpc_max_connections_per_client),
                                 .max_connections = ConfiguredConnectionCaps(config).grpc}),
      http_(config.http_listen, std::move(cert_pem), std::move(key_pem)) {}

Status StandbyFace::Start() {
  GPUPOOL_RETURN_IF_ERROR(grpc_.Start());
  return http_.Start();
}

void StandbyFace::OnPoll(const LeaderClaim& claim) {
  v1::NotLeader hint;
  // An expired row names nobody: clients pause and retry the list instead of chasing a leader
  // that is gone (a live row may still name a killed one; they find that out on connecting).
  if (claim.leader_live) {
    hint.set_leader_address(claim.leader_address);
    hint.set_leader_http(claim.leader_http);
  }
  hint.set_epoch(claim.epoch);
  hint.set_role(claim.leading ? "leader-starting" : "standby");
  grpc_.SetLeader(hint);
  http_.SetLeader(hint.leader_address(), hint.leader_http());
}

void StandbyFace::Stop() {
  grpc_.Shutdown();
  http_.Shutdown();
}

}  // namespace gpupool
