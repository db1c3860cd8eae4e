// Several gpupoold replicas behind one client setting (docs/ha.md): "10.0.0.1:7070,10.0.0.2:7070"
// becomes the gRPC target "ipv4:10.0.0.1:7070,10.0.0.2:7070". gRPC's pick_first policy then
// connects to the first address that accepts a connection. Every replica listens, standbys too:
// a standby answers with the leader's address (NotLeader), which clients follow
// (api/client/leader_follow.h); after a failover they come back to this list.
// A single address (a host name, a dns: or unix: target) is passed through unchanged.
//
// Thread safety: a pure function.
#pragma once

#include <string>

namespace gpupool {

// TLS to a list of replicas: gRPC checks the server certificate against the channel's one
// authority, and a list ("a:7070,b:7070") is no host name. Every gpupoold server certificate
// also names kReplicaTlsName (base/tls/pki.h; under the reserved .invalid domain, so it is never
// a real host), and a channel to a list checks that name instead. Sound because the CA is the
// cluster's own: it issues server certificates (serverAuth) only to gpupoold replicas, and node
// certificates are for client authentication only, which a TLS client refuses from a server.
inline constexpr char kReplicaTlsName[] = "replica.gpupool.invalid";
// The name to check for `addresses`: kReplicaTlsName for a list, "" (the address's own host) else.
inline std::string TlsTargetNameOf(const std::string& addresses) {
  return addresses.find(',') == std::string::npos ? std::string() : std::string(kReplicaTlsName);
}

inline std::string GrpcTargetOf(const std::string& addresses) {
  if (addresses.find(',') == std::string::npos) return addresses;
  if (addresses.find(':') < addresses.find(',') && addresses.rfind("ipv4:", 0) != 0 &&
      addresses.rfind("ipv6:", 0) != 0) {
    return "ipv4:" + addresses;
  }
  return addresses;
}

}  // namespace gpupool
