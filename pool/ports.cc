#include "pool/ports.h"

#include <algorithm>
#include <cctype>

namespace gpupool {
namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 15 || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '-';
  });
}

bool Digits(const std::string& s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// One port's own rules; messages read `at` + `sep` + "protocol: …" ("ports[1].protocol: …" in a
// list, "port '8080/sctp': protocol: …" for a parsed one).
Status CheckTaskPort(const TaskPort& p, const std::string& at, const std::string& sep) {
  if (p.port < 1 || p.port > 65535) {
    return Status::InvalidArgument(at + sep + "port: must be 1..65535, got " +
                                   std::to_string(p.port));
  }
  if (p.protocol != "tcp" && p.protocol != "udp") {
    return Status::InvalidArgument(at + sep + "protocol: want tcp or udp, got '" + p.protocol +
                                   "'");
  }
  if (!p.name.empty() && !ValidName(p.name)) {
    return Status::InvalidArgument(at + sep + "name '" + p.name +
                                   "': want [a-z][a-z0-9-]*, at most 15 characters");
  }
  return Status::Ok();
}

}  // namespace

Result<int> ParsePortNumber(const std::string& text) {
  if (!Digits(text) || std::stoi(text) < 1 || std::stoi(text) > 65535) {
    return Status::InvalidArgument("want a port number 1..65535, got '" + text + "'");
  }
  return std::stoi(text);
}

Status CheckTaskPorts(const std::vector<TaskPort>& ports, const std::string& field) {
  if (ports.size() > static_cast<size_t>(kMaxTaskPorts)) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxTaskPorts) +
                                   " per task, got " + std::to_string(ports.size()));
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    const TaskPort& p = ports[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    GPUPOOL_RETURN_IF_ERROR(CheckTaskPort(p, at, "."));
    for (size_t j = 0; j < i; ++j) {
      if (ports[j].port == p.port && ports[j].protocol == p.protocol) {
        return Status::InvalidArgument(at + ": " + std::to_string(p.port) + "/" + p.protocol +
                                       " is declared twice");
      }
      if (!p.name.empty() && ports[j].name == p.name) {
        return Status::InvalidArgument(at + ".name '" + p.name + "' is used twice");
      }
    }
  }
  return Status::Ok();
}

std::string FormatTaskPort(const TaskPort& port) {
  std::string out = std::to_string(port.port) + "/" + port.protocol;
  if (!port.name.empty()) out += ":" + port.name;
  return out;
}

Result<TaskPort> ParseTaskPort(const std::string& text) {
  TaskPort p;
  std::string rest = text;
  if (const size_t colon = rest.find(':'); colon != std::string::npos) {
    p.name = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  const size_t slash = rest.find('/');
  const std::string number = rest.substr(0, slash);
  if (!Digits(number)) {
    return Status::InvalidArgument("port '" + text + "': want PORT[/PROTOCOL][:NAME]");
  }
  p.port = std::stoi(number);
  if (slash != std::string::npos) p.protocol = rest.substr(slash + 1);
  GPUPOOL_RETURN_IF_ERROR(CheckTaskPort(p, "port '" + text + "'", ": "));
  return p;
}

std::string FormatTaskEndpoint(const TaskEndpoint& endpoint) {
  return FormatTaskPort(endpoint.port) + "=" + std::to_string(endpoint.host_port) + "@" +
         endpoint.host;
}

Result<TaskEndpoint> ParseTaskEndpoint(const std::string& text) {
  const size_t at = text.find('@');
  const size_t eq = text.rfind('=', at);
  if (at == std::string::npos || eq == std::string::npos || at + 1 == text.size()) {
    return Status::InvalidArgument("endpoint '" + text + "': want PORT/PROTOCOL[:NAME]=PORT@HOST");
  }
  TaskEndpoint e;
  GPUPOOL_ASSIGN_OR_RETURN(e.port, ParseTaskPort(text.substr(0, eq)));
  Result<int> host_port = ParsePortNumber(text.substr(eq + 1, at - eq - 1));
  if (!host_port.ok()) {
    return Status::InvalidArgument("endpoint '" + text + "': the node's port must be 1..65535");
  }
  e.host_port = *host_port;
  e.host = text.substr(at + 1);
  return e;
}

}  // namespace gpupool
