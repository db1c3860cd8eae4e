#include "agent/networks.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace gpupool::agent {

std::vector<std::string> ControlPlaneCidrs(const std::string& scheduler) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= scheduler.size()) {
    size_t comma = scheduler.find(',', start);
    if (comma == std::string::npos) comma = scheduler.size();
    std::string target = scheduler.substr(start, comma - start);
    start = comma + 1;
    // "host:port", "[v6]:port" (IPv6 is off in task networks: nothing to add), "dns:///host:port".
    if (target.rfind("dns:///", 0) == 0) target = target.substr(7);
    const size_t colon = target.rfind(':');
    const std::string host = target.substr(0, colon);
    if (host.empty() || host[0] == '[') continue;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) continue;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      const uint32_t ip = ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      if ((ip >> 24) == 127) continue;
      const std::string cidr = net::FormatIpv4(ip) + "/32";
      if (std::find(out.begin(), out.end(), cidr) == out.end()) out.push_back(cidr);
    }
    freeaddrinfo(res);
  }
  return out;
}

Result<std::shared_ptr<net::TaskNetworks>> OpenNetworks(const NetworkConfig& config,
                                                        const std::string& scheduler,
                                                        bool remove_leftovers) {
  if (!config.isolated) return std::shared_ptr<net::TaskNetworks>();
  net::NetworkOptions o = config.options;
  for (const std::string& c : ControlPlaneCidrs(scheduler)) o.deny.push_back(c);
  // Unset: the node's upstream resolvers (a loopback stub is not reachable from a task).
  if (o.dns.empty()) o.dns = net::DefaultNameServers();
  GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<net::TaskNetworks> nets,
                           net::TaskNetworks::Open(o, remove_leftovers));
  return std::shared_ptr<net::TaskNetworks>(std::move(nets));
}

sandbox::Capability NetworkCapability(bool sandboxed, bool containers,
                                      const std::shared_ptr<net::TaskNetworks>& networks,
                                      const std::string& networks_off,
                                      net::NetworkMode default_mode) {
  if (!containers) {
    // Without the runtime nothing builds a task a namespace: sandboxed, no task runs at all.
    return {"network", false,
            sandboxed ? "no task runs here: the sandbox needs the OCI runtime"
                      : "tasks share the node's network (no sandbox): a pool asking for none or "
                        "isolated cannot run here"};
  }
  std::string detail = std::string("default ") + net::NetworkModeName(default_mode) +
                       "; none: a namespace of the task's own, loopback only; ";
  if (networks) {
    std::string denied;
    for (const std::string& d : networks->denied()) denied += (denied.empty() ? "" : ", ") + d;
    std::string dns;
    for (const std::string& d : networks->options().dns) dns += (dns.empty() ? "" : ", ") + d;
    detail += "isolated: outbound through NAT from " + networks->options().subnet +
              ", refused to the node, other tasks and " + denied +
              (dns.empty() ? "; no name servers" : "; name servers " + dns) +
              "; declared ports published on " +
              std::to_string(networks->options().published_first) + "-" +
              std::to_string(networks->options().published_first +
                             networks->options().published_count - 1);
  } else {
    detail += "isolated: not offered (" + networks_off + ")";
  }
  return {"network", true, detail};
}

}  // namespace gpupool::agent
