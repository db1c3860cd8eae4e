// Task networks on the node (config `network:`, docs/network.md): the agent's TaskNetworks, built
// from its config, with gpupoold's own addresses added to what tasks may not reach.
//
// Thread safety: the functions may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/net/task_network.h"
#include "agent/sandbox/sandbox.h"
#include "base/status.h"

namespace gpupool::agent {

struct NetworkConfig {
  // Offer isolated networks: network namespaces, veths and a firewall of the agent's own (root,
  // iproute2, iptables). Off by default, as it changes the node's firewall and turns on IPv4
  // forwarding; the shipped configs turn it on.
  bool isolated = false;
  // For tasks whose pool names no network (Pool.network). A sandboxed task or a container then
  // has none, not the node's.
  net::NetworkMode default_mode = net::NetworkMode::kNone;
  net::NetworkOptions options;
  // The host name or address a task's published ports are reached on, as reported in its
  // endpoints (Task.endpoints); empty = the node's name.
  std::string advertise;
};

// The IPv4 addresses `scheduler` ("host:port" or a comma-separated list) resolves to, as /32
// CIDRs, loopback left out (a task's loopback is its own): what the firewall refuses besides the
// operator's `deny`. Names that do not resolve are skipped (the agent cannot reach them either).
std::vector<std::string> ControlPlaneCidrs(const std::string& scheduler);

// Opens the node's isolated networks when `config.isolated` (FAILED_PRECONDITION naming why it
// cannot); null when off.
// `remove_leftovers`: see net::TaskNetworks::Open (the agent keeps a previous process's
// namespaces until it has re-adopted the tasks that use them).
Result<std::shared_ptr<net::TaskNetworks>> OpenNetworks(const NetworkConfig& config,
                                                        const std::string& scheduler,
                                                        bool remove_leftovers = true);

// The `network` capability: which modes this node enforces, and which it cannot and why.
sandbox::Capability NetworkCapability(bool sandboxed, bool containers,
                                      const std::shared_ptr<net::TaskNetworks>& networks,
                                      const std::string& networks_off,
                                      net::NetworkMode default_mode);

}  // namespace gpupool::agent
