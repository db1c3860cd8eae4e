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

inline std::string GrpcTargetOf(const std::string& addresses) {
  if (addresses.find(',') == std::string::npos) return addresses;
  if (addresses.find(':') < addresses.find(',') && addresses.rfind("ipv4:", 0) != 0 &&
      addresses.rfind("ipv6:", 0) != 0) {
    return "ipv4:" + addresses;
  }
  return addresses;
}

}  // namespace gpupool
