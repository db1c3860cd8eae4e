// Several gpupoold replicas behind one client setting (docs/ha.md): "10.0.0.1:7070,10.0.0.2:7070"
// becomes the gRPC target "ipv4:10.0.0.1:7070,10.0.0.2:7070". gRPC's pick_first policy then
// connects to the first address that accepts a connection; standbys do not listen, so that is
// the leader, and after a failover the channel tries the list again and finds the new one.
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
