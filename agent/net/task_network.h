// Task networks: what a task's network namespace may reach (docs/network.md).
//
// Three modes, chosen per pool (Pool.network) with the node's default for pools that name none:
//   none      a network namespace of the task's own with only loopback: nothing in, nothing out.
//   isolated  a network namespace of its own with one veth to the node, an address from
//             `subnet` (a /30 per task) and a default route through the node, which masquerades
//             it outbound. The node's firewall (chains of our own, hooked first into INPUT,
//             FORWARD and nat POSTROUTING) refuses everything a tenant must not reach: the node
//             itself (every address it owns, so the agent's and any local daemon's ports), other
//             tasks (the whole subnet), link-local addresses (cloud metadata at 169.254.169.254),
//             the control plane (gpupoold's addresses, added by the agent) and the operator's
//             `deny` list (PostgreSQL, internal services). Nothing reaches a task from outside
//             but the replies to its own connections. IPv6 is off on both ends of the veth, so
//             no link-local IPv6 route reaches the node either.
//   host      the node's own network: for pools only an admin makes so (tools, benchmarks).
//
// Published ports (TaskTemplate.ports): an isolated task's declared port is reachable at a port
// of the node's own taken from `published_ports`, on every address the node owns but loopback,
// by anything that is not a task (a nat chain DNATs it; our FORWARD chain lets the DNATed
// connection in). Another task is still refused: a connection from a task's veth is never DNATed
// and the node refuses it as before. The task sees the caller's own address.
//
// The work is done by the well-kept tools an operator already knows: iproute2's `ip` (netns,
// veth, addresses, routes) and `iptables-restore` (one atomic load of our chains). A refused
// step is an error naming the command and its message; Prepare undoes what it did.
//
// Names: the netns is <prefix>-<slot> (/run/netns), the node's end of the veth <iface><slot>, the
// chains <PREFIX>-INPUT, -FORWARD, -POSTROUTING, and for published ports <PREFIX>-PREROUTING,
// -OUTPUT, -PORTS and one <PREFIX>-S<slot> per task that publishes any. Open() removes what an
// earlier run of the same prefix left (its tasks were killed as orphans) and loads the chains
// afresh.
//
// Thread safety: TaskNetworks is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "pool/ports.h"

namespace gpupool::agent::net {

enum class NetworkMode { kNone, kIsolated, kHost };

const char* NetworkModeName(NetworkMode mode);
// "none", "isolated", "host"; anything else is InvalidArgument naming the value.
Result<NetworkMode> ParseNetworkMode(const std::string& name);

// An IPv4 network in CIDR notation, parsed.
struct Cidr {
  uint32_t base = 0;  // host order, masked
  int bits = 0;
  std::string ToString() const;
  bool Contains(uint32_t address) const;
};
// "10.213.0.0/16"; a bare address is a /32. InvalidArgument names what is wrong.
Result<Cidr> ParseCidr(const std::string& text);
std::string FormatIpv4(uint32_t address);  // host order

// A port a task declares (TaskTemplate.ports; pool/ports.h checks it).
using PortSpec = TaskPort;

// A declared port and the node's port it is published on.
struct PublishedPort {
  PortSpec spec;
  int host_port = 0;
  friend bool operator==(const PublishedPort&, const PublishedPort&) = default;
};

// FormatTaskPort's "8080/tcp:http" with "=<node's port>" (task records), and back.
std::string FormatPublishedPort(const PublishedPort& p);
Result<PublishedPort> ParsePublishedPort(const std::string& text);

struct NetworkOptions {
  std::string subnet = "10.213.0.0/16";  // task addresses: a /30 per isolated task, /24 at least
  std::vector<std::string> deny;         // CIDRs no task may reach, beyond the built-in ones
  // Name servers an isolated task uses (its /etc/resolv.conf), reachable on port 53 even inside
  // `deny`; empty: the task keeps the resolv.conf it has (DefaultNameServers() finds the node's).
  std::vector<std::string> dns;
  // The node's ports isolated tasks' declared ports are published on: [first, first + count).
  // The default stays below Linux's ephemeral range (32768..60999), as Kubernetes' NodePorts do.
  int published_first = 30000;
  int published_count = 2768;
  std::string prefix = "gpupool";  // netns names and (upper-cased) chain names
  std::string iface = "gpv";       // the node's ends of the veths; 1..6 characters
  std::string ip = "ip";           // programs, absolute or looked up in PATH
  std::string iptables = "iptables";
  std::string iptables_restore = "iptables-restore";
};

// One prepared isolated network; Release() it after the task ended.
struct TaskNetwork {
  int slot = -1;
  std::string netns;       // name under /run/netns
  std::string netns_path;  // /run/netns/<netns>: what runc's spec and the sandbox's setns take
  std::string address;     // the task's address (eth0)
  std::string gateway;     // the node's end
  std::string host_iface;
  std::string resolv_conf;  // the task's /etc/resolv.conf (`dns`), bound read-only; "" = none
  std::vector<PublishedPort> published;  // its declared ports and the node's ports they are on
};

// The node's upstream name servers, for isolated tasks: /etc/resolv.conf's, less loopback ones
// (a resolver on the node's loopback is not the task's); where only a loopback stub is listed
// (systemd-resolved), /run/systemd/resolve/resolv.conf's. Empty when none is found.
std::vector<std::string> DefaultNameServers(const std::string& resolv_conf = "/etc/resolv.conf");

class TaskNetworks {
 public:
  // Validates the options, removes leftovers of an earlier run, loads the firewall chains and
  // turns IPv4 forwarding on. FailedPrecondition when the node cannot (not root, no `ip` or
  // `iptables-restore`, the kernel refused): the caller reports `isolated` as not enforced.
  // `remove_leftovers` false: an agent that re-adopts the tasks of a previous process keeps
  // their namespaces, and calls RemoveLeftovers() once it knows which those are.
  static Result<std::unique_ptr<TaskNetworks>> Open(NetworkOptions options,
                                                    bool remove_leftovers = true);
  ~TaskNetworks() = default;

  // A namespace with the task's veth, address and route, and `ports` published on ports of the
  // node's (InvalidArgument for a bad port, ResourceExhausted when `published_ports` has too
  // few free); `task` names it in errors and logs.
  Result<TaskNetwork> Prepare(const std::string& task, const std::vector<PortSpec>& ports = {});
  // Deletes the namespace (and with it the veth), unpublishes its ports and frees the slot and
  // the node's ports. Idempotent.
  void Release(const TaskNetwork& network);
  // The network a previous agent process prepared in `slot` for a task that still runs, for a
  // restarted agent that re-adopts it: the slot and the node's ports of `published` are taken
  // again and their rules loaded afresh (Open flushed them). FailedPrecondition when the slot or
  // a port is out of range or taken, or its namespace is gone.
  Result<TaskNetwork> Adopt(int slot, const std::string& task,
                            const std::vector<PublishedPort>& published = {});
  // Deletes every namespace and node-side veth of this prefix but those of `keep` (slots).
  void RemoveLeftovers(const std::vector<int>& keep) const;

  // Removes the hooks and chains and every namespace of this prefix (tests; no agent command
  // runs it yet: the chains of a stopped agent stay, matching only its own veths).
  void Uninstall();

  const NetworkOptions& options() const { return options_; }
  // The CIDRs the firewall refuses, built-in ones included, in rule order.
  const std::vector<std::string>& denied() const { return denied_; }
  int in_use() const;

 private:
  explicit TaskNetworks(NetworkOptions options, Cidr subnet, std::vector<std::string> denied);
  Status RunIp(const std::vector<std::string>& args, const std::string& batch = "") const;
  Status LoadChains() const;
  Status Hook(const std::string& table, const std::string& chain, const std::string& target) const;
  // Loads the slot's chain of DNAT rules and its jump from -PORTS; removes both.
  Status Publish(const TaskNetwork& network) const;
  void Unpublish(int slot) const;
  // Takes free node ports for `ports` (REQUIRES: mu_); ResourceExhausted when too few are free.
  Result<std::vector<PublishedPort>> TakeHostPorts(const std::vector<PortSpec>& ports)
      GPUPOOL_REQUIRES(mu_);
  void FreeHostPorts(const std::vector<PublishedPort>& ports) GPUPOOL_REQUIRES(mu_);
  void Unhook(const std::string& table, const std::string& chain, const std::string& target) const;
  std::string Chain(const std::string& suffix) const;

  NetworkOptions options_;
  Cidr subnet_;
  std::vector<std::string> denied_;
  mutable Mutex mu_;
  std::vector<bool> used_ GPUPOOL_GUARDED_BY(mu_);
  int next_ GPUPOOL_GUARDED_BY(mu_) = 0;  // where the search for a free slot starts
  std::vector<bool> host_ports_used_ GPUPOOL_GUARDED_BY(mu_);  // [published_first + i]
  int next_host_port_ GPUPOOL_GUARDED_BY(mu_) = 0;
};

// One task's isolated network, released (the namespace deleted, the slot freed) when destroyed.
class NetworkLease {
 public:
  // Prepares a network from `networks` (REQUIRES: not null) for `task`, publishing `ports`.
  static Result<std::unique_ptr<NetworkLease>> Take(std::shared_ptr<TaskNetworks> networks,
                                                    const std::string& task,
                                                    const std::vector<PortSpec>& ports = {});
  // The network of a re-adopted task (TaskNetworks::Adopt).
  static Result<std::unique_ptr<NetworkLease>> Adopt(
      std::shared_ptr<TaskNetworks> networks, int slot, const std::string& task,
      const std::vector<PublishedPort>& published = {});
  ~NetworkLease();
  NetworkLease(const NetworkLease&) = delete;
  NetworkLease& operator=(const NetworkLease&) = delete;
  const TaskNetwork& network() const { return network_; }
  // Keeps the namespace and the slot when this goes: its task outlives the agent process, and
  // the next one adopts the network (Adopt).
  void Abandon() { networks_.reset(); }

 private:
  NetworkLease(std::shared_ptr<TaskNetworks> networks, TaskNetwork network)
      : networks_(std::move(networks)), network_(std::move(network)) {}
  std::shared_ptr<TaskNetworks> networks_;
  TaskNetwork network_;
};

}  // namespace gpupool::agent::net
