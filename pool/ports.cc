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

}  // namespace

Status CheckTaskPorts(const std::vector<TaskPort>& ports, const std::string& field) {
  if (ports.size() > static_cast<size_t>(kMaxTaskPorts)) {
    return Status::InvalidArgument(field + ": at most " + std::to_string(kMaxTaskPorts) +
                                   " per task, got " + std::to_string(ports.size()));
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    const TaskPort& p = ports[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (p.port < 1 || p.port > 65535) {
      return Status::InvalidArgument(at + ".port: must be 1..65535, got " + std::to_string(p.port));
    }
    if (p.protocol != "tcp" && p.protocol != "udp") {
      return Status::InvalidArgument(at + ".protocol: want tcp or udp, got '" + p.protocol + "'");
    }
    if (!p.name.empty() && !ValidName(p.name)) {
      return Status::InvalidArgument(at + ".name '" + p.name +
                                     "': want [a-z][a-z0-9-]*, at most 15 characters");
    }
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
  if (Status s = CheckTaskPorts({p}, "port"); !s.ok()) {
    return Status::InvalidArgument("port '" + text + "': " + s.message().substr(8));
  }
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
  const std::string host_port = text.substr(eq + 1, at - eq - 1);
  if (!Digits(host_port) || std::stoi(host_port) < 1 || std::stoi(host_port) > 65535) {
    return Status::InvalidArgument("endpoint '" + text + "': the node's port must be 1..65535");
  }
  e.host_port = std::stoi(host_port);
  e.host = text.substr(at + 1);
  return e;
}

}  // namespace gpupool
