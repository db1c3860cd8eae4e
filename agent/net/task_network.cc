#include "agent/net/task_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/control_file.h"
#include "base/log.h"
#include "base/run_tool.h"

namespace gpupool::agent::net {
namespace {

constexpr int64_t kToolTimeoutMs = 10'000;
constexpr char kNetnsDir[] = "/run/netns";

// IPv6 off inside a namespace, before its interfaces come up: no link-local IPv6 address, so no
// IPv6 route to the node. /proc/sys/net answers for the network namespace of the thread that
// opens it, and setns(CLONE_NEWNET) is allowed on one thread of a threaded process — so a
// short-lived thread of our own does it, with no helper program.
Status DisableIpv6In(const std::string& netns_path) {
  if (!std::filesystem::exists("/proc/sys/net/ipv6")) return Status::Ok();  // no IPv6 at all
  Status result = Status::Ok();
  std::thread worker([&] {
    const int fd = open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      result = Status::FailedPrecondition("setns " + netns_path + ": " + std::strerror(errno));
      if (fd >= 0) close(fd);
      return;
    }
    close(fd);
    for (const char* conf : {"all", "default", "eth0", "lo"}) {
      const Status s =
          WriteControlFile(std::string("/proc/sys/net/ipv6/conf/") + conf + "/disable_ipv6", "1");
      if (!s.ok()) {
        result = s;
        return;
      }
    }
  });
  worker.join();
  return result;
}

bool ValidName(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-'; });
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Result<ToolResult> Run(const std::vector<std::string>& argv, int pass_fd = -1) {
  ToolRun run;
  run.argv = argv;
  run.pass_fd = pass_fd;
  run.timeout_ms = kToolTimeoutMs;
  return RunTool(run);
}

// Cleanup steps whose failure changes nothing (the thing was already gone).
void RunBestEffort(const std::vector<std::string>& argv) { [[maybe_unused]] auto r = Run(argv); }

std::string Joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs a step that must succeed: FAILED_PRECONDITION naming the command (`what`, default argv)
// and its last line of stderr otherwise. `pass_fd` (optional) is closed here.
Status RunStep(const std::vector<std::string>& argv, int pass_fd = -1, std::string what = "") {
  auto r = Run(argv, pass_fd);
  if (pass_fd >= 0) close(pass_fd);
  if (!r.ok()) return Status::FailedPrecondition("network: " + r.status().message());
  if (!r->ok()) {
    if (what.empty()) what = Joined(argv);
    return Status::FailedPrecondition("network: " + what + ": " + r->Describe());
  }
  return Status::Ok();
}

}  // namespace

std::string FormatPublishedPort(const PublishedPort& p) {
  std::string out = FormatTaskPort(p.spec);
  if (p.host_port > 0) out += "=" + std::to_string(p.host_port);
  return out;
}

Result<PublishedPort> ParsePublishedPort(const std::string& text) {
  PublishedPort p;
  const size_t eq = text.find('=');
  if (eq != std::string::npos) {
    Result<int> host = ParsePortNumber(text.substr(eq + 1));
    if (!host.ok()) {
      return Status::InvalidArgument("port '" + text + "': the node's port must be 1..65535");
    }
    p.host_port = *host;
  }
  GPUPOOL_ASSIGN_OR_RETURN(p.spec, ParseTaskPort(text.substr(0, eq)));
  return p;
}

const char* NetworkModeName(NetworkMode mode) {
  switch (mode) {
    case NetworkMode::kNone:
      return "none";
    case NetworkMode::kIsolated:
      return "isolated";
    case NetworkMode::kHost:
      return "host";
  }
  return "?";
}

Result<NetworkMode> ParseNetworkMode(const std::string& name) {
  if (name == "none") return NetworkMode::kNone;
  if (name == "isolated") return NetworkMode::kIsolated;
  if (name == "host") return NetworkMode::kHost;
  return Status::InvalidArgument("network mode '" + name + "': want none, isolated or host");
}

std::string FormatIpv4(uint32_t address) {
  return std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 0xff) + "." +
         std::to_string((address >> 8) & 0xff) + "." + std::to_string(address & 0xff);
}

std::string Cidr::ToString() const { return FormatIpv4(base) + "/" + std::to_string(bits); }

bool Cidr::Contains(uint32_t address) const {
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (address & mask) == base;
}

Result<Cidr> ParseCidr(const std::string& text) {
  const size_t slash = text.find('/');
  const std::string addr = text.substr(0, slash);
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) {
    return Status::InvalidArgument("'" + text + "': not an IPv4 address or CIDR");
  }
  Cidr c;
  c.bits = 32;
  if (slash != std::string::npos) {
    const std::string bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 2 ||
        !std::all_of(bits.begin(), bits.end(), [](unsigned char ch) { return std::isdigit(ch); }) ||
        std::stoi(bits) > 32) {
      return Status::InvalidArgument("'" + text + "': the prefix length must be 0..32");
    }
    c.bits = std::stoi(bits);
  }
  const uint32_t mask = c.bits == 0 ? 0 : ~uint32_t{0} << (32 - c.bits);
  c.base = ntohl(a.s_addr) & mask;
  return c;
}

TaskNetworks::TaskNetworks(NetworkOptions options, Cidr subnet, std::vector<std::string> denied)
    : options_(std::move(options)),
      subnet_(subnet),
      denied_(std::move(denied)),
      used_(size_t{1} << (32 - subnet.bits - 2), false),
      host_ports_used_(static_cast<size_t>(options_.published_count), false) {}

std::string TaskNetworks::Chain(const std::string& suffix) const {
  return Upper(options_.prefix) + "-" + suffix;
}

Result<std::unique_ptr<TaskNetworks>> TaskNetworks::Open(NetworkOptions options,
                                                         bool remove_leftovers) {
  if (!ValidName(options.prefix, 16)) {
    return Status::InvalidArgument("network.prefix '" + options.prefix +
                                   "': 1..16 letters, digits or '-'");
  }
  if (!ValidName(options.iface, 6)) {
    return Status::InvalidArgument("network.iface '" + options.iface +
                                   "': 1..6 letters, digits or '-' (Linux names stop at 15)");
  }
  auto subnet = ParseCidr(options.subnet);
  if (!subnet.ok()) return Status::InvalidArgument("network.subnet: " + subnet.status().message());
  if (subnet->bits < 8 || subnet->bits > 24) {
    return Status::InvalidArgument("network.subnet '" + options.subnet +
                                   "': the prefix length must be 8..24 (a /30 per task)");
  }
  // Built-in refusals first: link-local (cloud metadata services answer at 169.254.169.254),
  // then every other task.
  std::vector<std::string> denied = {"169.254.0.0/16", subnet->ToString()};
  for (const std::string& d : options.dns) {
    auto c = ParseCidr(d);
    if (!c.ok() || c->bits != 32) {
      return Status::InvalidArgument("network.dns: '" + d + "': want an IPv4 address");
    }
  }
  for (const std::string& d : options.deny) {
    auto c = ParseCidr(d);
    if (!c.ok()) return Status::InvalidArgument("network.deny: " + c.status().message());
    denied.push_back(c->ToString());
  }
  if (options.published_first < 1 || options.published_count < 0 ||
      options.published_first + options.published_count - 1 > 65535) {
    return Status::InvalidArgument(
        "network.published_ports: " + std::to_string(options.published_first) + " + " +
        std::to_string(options.published_count) + " ports do not fit in 1..65535");
  }
  if (geteuid() != 0) {
    return Status::FailedPrecondition(
        "network: isolated task networks need root (network namespaces, veths, the firewall)");
  }
  std::unique_ptr<TaskNetworks> nets(new TaskNetworks(std::move(options), *subnet, denied));
  if (remove_leftovers) nets->RemoveLeftovers({});
  GPUPOOL_RETURN_IF_ERROR(nets->LoadChains());
  GPUPOOL_RETURN_IF_ERROR(nets->Hook("filter", "INPUT", nets->Chain("INPUT")));
  GPUPOOL_RETURN_IF_ERROR(nets->Hook("filter", "FORWARD", nets->Chain("FORWARD")));
  GPUPOOL_RETURN_IF_ERROR(nets->Hook("nat", "POSTROUTING", nets->Chain("POSTROUTING")));
  GPUPOOL_RETURN_IF_ERROR(nets->Hook("nat", "PREROUTING", nets->Chain("PREROUTING")));
  GPUPOOL_RETURN_IF_ERROR(nets->Hook("nat", "OUTPUT", nets->Chain("OUTPUT")));
  // Masquerading needs the node to forward. Only our FORWARD chain accepts anything new; the
  // operator's own FORWARD policy is left as it was for everything else.
  const Status fwd = WriteControlFile("/proc/sys/net/ipv4/ip_forward", "1");
  if (!fwd.ok())
    return Status::FailedPrecondition("network: cannot enable forwarding: " + fwd.message());
  return nets;
}

Status TaskNetworks::LoadChains() const {
  const std::string in = Chain("INPUT"), fwd = Chain("FORWARD"), post = Chain("POSTROUTING");
  const std::string task_if = options_.iface + "+";
  // REJECT rather than DROP: a refused connection fails at once with "no route to host" instead
  // of hanging the tenant's program until its own timeout.
  const std::string reject = " -j REJECT --reject-with icmp-admin-prohibited\n";
  std::string rules =
      "*filter\n:" + in + " - [0:0]\n:" + fwd + " - [0:0]\n-F " + in + "\n-F " + fwd + "\n";
  // Replies to the node's own connections (a readiness probe, a published port) come back in;
  // nothing a task starts does.
  rules +=
      "-A " + in + " -i " + task_if + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n";
  rules += "-A " + in + " -i " + task_if + reject;
  rules +=
      "-A " + fwd + " -o " + task_if + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n";
  // A published port: only the nat chains below DNAT to a task, and never for a task's packets.
  rules += "-A " + fwd + " -o " + task_if + " -m conntrack --ctstate DNAT -j ACCEPT\n";
  rules += "-A " + fwd + " -o " + task_if + " -j DROP\n";
  // Replies to connections made to a task (a published port) go back, also to a caller in a
  // denied range; a connection a task starts to one was refused at its first packet.
  rules +=
      "-A " + fwd + " -i " + task_if + " -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n";
  // Name servers first: a resolver inside a denied range still answers on port 53.
  for (const std::string& d : options_.dns) {
    for (const char* proto : {"udp", "tcp"}) {
      rules +=
          "-A " + fwd + " -i " + task_if + " -d " + d + " -p " + proto + " --dport 53 -j ACCEPT\n";
    }
  }
  for (const std::string& d : denied_) {
    rules += "-A " + fwd + " -i " + task_if + " -d " + d + reject;
  }
  rules += "-A " + fwd + " -i " + task_if + " -j ACCEPT\nCOMMIT\n";
  const std::string pre = Chain("PREROUTING"), out = Chain("OUTPUT"), ports = Chain("PORTS");
  rules += "*nat\n:" + post + " - [0:0]\n:" + pre + " - [0:0]\n:" + out + " - [0:0]\n:" + ports +
           " - [0:0]\n-F " + post + "\n-F " + pre + "\n-F " + out + "\n-F " + ports + "\n";
  rules += "-A " + post + " -s " + subnet_.ToString() + " ! -d " + subnet_.ToString() +
           " -j MASQUERADE\n";
  // Published ports answer on the node's own addresses, to anything but a task (a task's
  // packets are never DNATed, so the node refuses them as any other) and but loopback (a
  // loopback source cannot be routed to a task).
  rules += "-A " + pre + " -i " + task_if + " -j RETURN\n";
  rules += "-A " + pre + " -m addrtype --dst-type LOCAL -j " + ports + "\n";
  rules += "-A " + out + " ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j " + ports + "\n";
  rules += "COMMIT\n";
  GPUPOOL_ASSIGN_OR_RETURN(int fd, SecretFd("gpupool-firewall", rules));
  const std::vector<std::string> argv = {options_.iptables_restore, "--noflush", "/proc/self/fd/3"};
  return RunStep(argv, fd);
}

Status TaskNetworks::Hook(const std::string& table, const std::string& chain,
                          const std::string& target) const {
  auto check = Run({options_.iptables, "-w", "-t", table, "-C", chain, "-j", target});
  if (!check.ok()) return Status::FailedPrecondition("network: " + check.status().message());
  if (check->ok()) return Status::Ok();  // already hooked by an earlier run
  return RunStep({options_.iptables, "-w", "-t", table, "-I", chain, "1", "-j", target});
}

void TaskNetworks::Unhook(const std::string& table, const std::string& chain,
                          const std::string& target) const {
  // A rule inserted twice (two runs racing) is removed as often as it is there.
  for (int i = 0; i < 8; ++i) {
    auto r = Run({options_.iptables, "-w", "-t", table, "-D", chain, "-j", target});
    if (!r.ok() || !r->ok()) break;
  }
  RunBestEffort({options_.iptables, "-w", "-t", table, "-F", target});
  RunBestEffort({options_.iptables, "-w", "-t", table, "-X", target});
}

void TaskNetworks::RemoveLeftovers(const std::vector<int>& keep) const {
  std::error_code ec;
  const auto kept = [&](const std::string& slot) {
    return std::find(keep.begin(), keep.end(), std::atoi(slot.c_str())) != keep.end();
  };
  // Published ports of tasks that are gone: their slots' nat chains.
  if (auto listed = Run({options_.iptables, "-w", "-t", "nat", "-S"});
      listed.ok() && listed->ok()) {
    const std::string declared = "-N " + Chain("S");
    std::istringstream lines(listed->out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(declared, 0) != 0) continue;
      const std::string slot = line.substr(declared.size());
      if (!slot.empty() &&
          std::all_of(slot.begin(), slot.end(), [](unsigned char c) { return std::isdigit(c); }) &&
          !kept(slot)) {
        Unpublish(std::atoi(slot.c_str()));
      }
    }
  }
  const std::string ns_prefix = options_.prefix + "-";
  for (const auto& e : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(ns_prefix, 0) != 0 || kept(name.substr(ns_prefix.size()))) continue;
    RunBestEffort({options_.ip, "netns", "del", name});
  }
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(options_.iface, 0) != 0 || name.size() == options_.iface.size()) continue;
    const std::string rest = name.substr(options_.iface.size());
    if (std::all_of(rest.begin(), rest.end(), [](unsigned char c) { return std::isdigit(c); }) &&
        !kept(rest)) {
      RunBestEffort({options_.ip, "link", "del", name});
    }
  }
}

Result<TaskNetwork> TaskNetworks::Adopt(int slot, const std::string& task,
                                        const std::vector<PublishedPort>& published) {
  TaskNetwork n;
  {
    MutexLock lock(&mu_);
    if (slot < 0 || static_cast<size_t>(slot) >= used_.size() || used_[slot]) {
      return Status::FailedPrecondition("network: slot " + std::to_string(slot) +
                                        " is out of range or taken (task " + task + ")");
    }
    for (size_t i = 0; i < published.size(); ++i) {
      const int at = published[i].host_port - options_.published_first;
      if (at < 0 || at >= options_.published_count || host_ports_used_[at]) {
        std::vector<PublishedPort> taken(published.begin(), published.begin() + i);
        FreeHostPorts(taken);
        return Status::FailedPrecondition(
            "network: the node's port " + std::to_string(published[i].host_port) +
            " is outside network.published_ports or taken (task " + task + ")");
      }
      host_ports_used_[at] = true;
    }
    used_[slot] = true;
  }
  n.published = published;
  n.slot = slot;
  const uint32_t block = subnet_.base + static_cast<uint32_t>(slot) * 4;
  n.netns = options_.prefix + "-" + std::to_string(slot);
  n.netns_path = std::string(kNetnsDir) + "/" + n.netns;
  n.gateway = FormatIpv4(block + 1);
  n.address = FormatIpv4(block + 2);
  n.host_iface = options_.iface + std::to_string(slot);
  if (!options_.dns.empty()) {
    n.resolv_conf = "/run/" + options_.prefix + "-net/" + n.netns + ".resolv.conf";
  }
  Status s = Status::Ok();
  if (!std::filesystem::exists(n.netns_path)) {
    s = Status::FailedPrecondition("network: " + n.netns_path + " is gone (task " + task + ")");
  } else if (!n.published.empty()) {
    s = Publish(n);
  }
  if (!s.ok()) {
    MutexLock lock(&mu_);
    used_[slot] = false;
    FreeHostPorts(n.published);
    return s;
  }
  return n;
}

Result<std::vector<PublishedPort>> TaskNetworks::TakeHostPorts(const std::vector<PortSpec>& ports) {
  std::vector<PublishedPort> out;
  const int count = options_.published_count;
  for (int i = 0; i < count && out.size() < ports.size(); ++i) {
    const int at = (next_host_port_ + i) % count;
    if (host_ports_used_[at]) continue;
    host_ports_used_[at] = true;
    out.push_back({ports[out.size()], options_.published_first + at});
  }
  if (out.size() < ports.size()) {
    FreeHostPorts(out);
    return Status::ResourceExhausted(
        "network: too few of the node's ports to publish on are free (" +
        std::to_string(ports.size()) + " wanted; network.published_ports " +
        std::to_string(options_.published_first) + "-" +
        std::to_string(options_.published_first + count - 1) + ")");
  }
  next_host_port_ = (out.back().host_port - options_.published_first + 1) % count;
  return out;
}

void TaskNetworks::FreeHostPorts(const std::vector<PublishedPort>& ports) {
  for (const PublishedPort& p : ports) {
    const int at = p.host_port - options_.published_first;
    if (at >= 0 && at < options_.published_count) host_ports_used_[at] = false;
  }
}

Status TaskNetworks::Publish(const TaskNetwork& n) const {
  const std::string slot_chain = Chain("S") + std::to_string(n.slot);
  std::string rules = "*nat\n:" + slot_chain + " - [0:0]\n-F " + slot_chain + "\n";
  for (const PublishedPort& p : n.published) {
    rules += "-A " + slot_chain + " -p " + p.spec.protocol + " --dport " +
             std::to_string(p.host_port) + " -j DNAT --to-destination " + n.address + ":" +
             std::to_string(p.spec.port) + "\n";
  }
  rules += "-A " + Chain("PORTS") + " -j " + slot_chain + "\nCOMMIT\n";
  GPUPOOL_ASSIGN_OR_RETURN(int fd, SecretFd("gpupool-publish", rules));
  return RunStep({options_.iptables_restore, "--noflush", "/proc/self/fd/3"}, fd,
                 "iptables-restore (publishing the ports of " + n.netns + ")");
}

void TaskNetworks::Unpublish(int slot) const {
  const std::string slot_chain = Chain("S") + std::to_string(slot);
  for (int i = 0; i < 8; ++i) {
    auto r = Run({options_.iptables, "-w", "-t", "nat", "-D", Chain("PORTS"), "-j", slot_chain});
    if (!r.ok() || !r->ok()) break;
  }
  RunBestEffort({options_.iptables, "-w", "-t", "nat", "-F", slot_chain});
  RunBestEffort({options_.iptables, "-w", "-t", "nat", "-X", slot_chain});
}

Status TaskNetworks::RunIp(const std::vector<std::string>& args, const std::string& batch) const {
  std::vector<std::string> argv = {options_.ip};
  argv.insert(argv.end(), args.begin(), args.end());
  int fd = -1;
  if (!batch.empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(fd, SecretFd("gpupool-ip-batch", batch));
    argv.push_back("-batch");
    argv.push_back("/proc/self/fd/3");
  }
  std::string what = Joined(argv);
  if (!batch.empty()) what += " [" + batch.substr(0, batch.find('\n')) + " …]";
  return RunStep(argv, fd, what);
}

Result<TaskNetwork> TaskNetworks::Prepare(const std::string& task,
                                          const std::vector<PortSpec>& ports) {
  GPUPOOL_RETURN_IF_ERROR(CheckTaskPorts(ports));
  TaskNetwork n;
  {
    MutexLock lock(&mu_);
    if (!ports.empty()) {
      GPUPOOL_ASSIGN_OR_RETURN(n.published, TakeHostPorts(ports));
    }
    const int slots = static_cast<int>(used_.size());
    for (int i = 0; i < slots; ++i) {
      const int s = (next_ + i) % slots;
      if (!used_[s]) {
        n.slot = s;
        break;
      }
    }
    if (n.slot < 0) {
      FreeHostPorts(n.published);
      return Status::ResourceExhausted("network: all " + std::to_string(slots) +
                                       " task addresses of " + subnet_.ToString() +
                                       " are in use (network.subnet)");
    }
    used_[n.slot] = true;
    next_ = (n.slot + 1) % slots;
  }
  const uint32_t block = subnet_.base + static_cast<uint32_t>(n.slot) * 4;
  n.netns = options_.prefix + "-" + std::to_string(n.slot);
  n.netns_path = std::string(kNetnsDir) + "/" + n.netns;
  n.gateway = FormatIpv4(block + 1);
  n.address = FormatIpv4(block + 2);
  n.host_iface = options_.iface + std::to_string(n.slot);

  Status s = RunIp({}, "netns add " + n.netns + "\nlink add " + n.host_iface +
                           " type veth peer name eth0 netns " + n.netns + "\n");
  if (s.ok() && std::filesystem::exists("/proc/sys/net/ipv6")) {
    s = WriteControlFile("/proc/sys/net/ipv6/conf/" + n.host_iface + "/disable_ipv6", "1");
  }
  if (s.ok()) s = DisableIpv6In(n.netns_path);
  if (s.ok()) {
    s = RunIp({}, "addr add " + n.gateway + "/30 dev " + n.host_iface + "\nlink set " +
                      n.host_iface + " up\n");
  }
  if (s.ok()) {
    s = RunIp({"-n", n.netns}, "link set lo up\naddr add " + n.address + "/30 dev eth0\n" +
                                   "link set eth0 up\nroute add default via " + n.gateway + "\n");
  }
  if (s.ok() && !options_.dns.empty()) {
    const std::string dir = "/run/" + options_.prefix + "-net";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    n.resolv_conf = dir + "/" + n.netns + ".resolv.conf";
    std::string text = "# written by gpupool-agent for an isolated task (network.dns)\n";
    for (const std::string& d : options_.dns) text += "nameserver " + d + "\n";
    std::ofstream out(n.resolv_conf, std::ios::trunc);
    out << text;
    out.close();
    if (!out || chmod(n.resolv_conf.c_str(), 0644) != 0) {
      s = Status::FailedPrecondition("network: cannot write " + n.resolv_conf);
    }
  }
  if (s.ok() && !n.published.empty()) s = Publish(n);
  if (!s.ok()) {
    Release(n);
    return Status::FailedPrecondition(s.message() + " (task " + task + ")");
  }
  std::string published;
  for (const PublishedPort& p : n.published) {
    published += (published.empty() ? "" : " ") + FormatPublishedPort(p);
  }
  LogInfo("agent.network", "isolated network ready",
          {{"task", task}, {"netns", n.netns}, {"address", n.address}, {"published", published}});
  return n;
}

void TaskNetworks::Release(const TaskNetwork& network) {
  if (network.slot < 0) return;
  if (!network.published.empty()) Unpublish(network.slot);
  // Deleting the namespace destroys its end of the veth and with it the node's; the explicit
  // link delete covers a namespace that was never made.
  RunBestEffort({options_.ip, "netns", "del", network.netns});
  if (!network.resolv_conf.empty()) std::remove(network.resolv_conf.c_str());
  if (std::filesystem::exists("/sys/class/net/" + network.host_iface)) {
    RunBestEffort({options_.ip, "link", "del", network.host_iface});
  }
  MutexLock lock(&mu_);
  if (static_cast<size_t>(network.slot) < used_.size()) used_[network.slot] = false;
  FreeHostPorts(network.published);
}

void TaskNetworks::Uninstall() {
  Unhook("filter", "INPUT", Chain("INPUT"));
  Unhook("filter", "FORWARD", Chain("FORWARD"));
  Unhook("nat", "POSTROUTING", Chain("POSTROUTING"));
  RemoveLeftovers({});
  Unhook("nat", "PREROUTING", Chain("PREROUTING"));
  Unhook("nat", "OUTPUT", Chain("OUTPUT"));
  RunBestEffort({options_.iptables, "-w", "-t", "nat", "-X", Chain("PORTS")});
  MutexLock lock(&mu_);
  std::fill(used_.begin(), used_.end(), false);
  std::fill(host_ports_used_.begin(), host_ports_used_.end(), false);
}

std::vector<std::string> DefaultNameServers(const std::string& resolv_conf) {
  auto read = [](const std::string& path, bool* loopback_seen) {
    std::vector<std::string> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string key, address;
      if (!(words >> key >> address) || key != "nameserver") continue;
      auto c = ParseCidr(address);
      if (!c.ok()) continue;  // IPv6: task networks have none
      if ((c->base >> 24) == 127) {
        *loopback_seen = true;
        continue;
      }
      if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
    }
    return out;
  };
  bool loopback = false;
  std::vector<std::string> servers = read(resolv_conf, &loopback);
  if (servers.empty() && loopback) {
    bool unused = false;
    servers = read("/run/systemd/resolve/resolv.conf", &unused);
  }
  return servers;
}

Result<std::unique_ptr<NetworkLease>> NetworkLease::Take(std::shared_ptr<TaskNetworks> networks,
                                                         const std::string& task,
                                                         const std::vector<PortSpec>& ports) {
  GPUPOOL_ASSIGN_OR_RETURN(TaskNetwork n, networks->Prepare(task, ports));
  return std::unique_ptr<NetworkLease>(new NetworkLease(std::move(networks), std::move(n)));
}

Result<std::unique_ptr<NetworkLease>> NetworkLease::Adopt(
    std::shared_ptr<TaskNetworks> networks, int slot, const std::string& task,
    const std::vector<PublishedPort>& published) {
  GPUPOOL_ASSIGN_OR_RETURN(TaskNetwork n, networks->Adopt(slot, task, published));
  return std::unique_ptr<NetworkLease>(new NetworkLease(std::move(networks), std::move(n)));
}

NetworkLease::~NetworkLease() {
  if (networks_) networks_->Release(network_);
}

int TaskNetworks::in_use() const {
  MutexLock lock(&mu_);
  return static_cast<int>(std::count(used_.begin(), used_.end(), true));
}

}  // namespace gpupool::agent::net
