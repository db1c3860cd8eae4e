// Ports a task listens on, as a tenant declares them (TaskTemplate.ports) and a node publishes
// them (agent/net/task_network.h): the checks both sides share, so a submission is refused naming
// what is wrong instead of failing on every node later.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct TaskPort {
  std::string name;              // optional: [a-z][a-z0-9-]*, at most 15, unique in a task
  int port = 0;                  // 1..65535, in the task's network
  std::string protocol = "tcp";  // "tcp" or "udp"
  friend bool operator==(const TaskPort&, const TaskPort&) = default;
};

// Where a running task's declared port is reached: its node's address and port.
struct TaskEndpoint {
  TaskPort port;
  std::string host;
  int host_port = 0;
  friend bool operator==(const TaskEndpoint&, const TaskEndpoint&) = default;
};

inline constexpr int kMaxTaskPorts = 16;

// At most kMaxTaskPorts, each valid, no port/protocol and no name twice. InvalidArgument naming
// the entry as `<field>[i]…` ("template.ports[1].protocol: …").
Status CheckTaskPorts(const std::vector<TaskPort>& ports, const std::string& field = "ports");

// "PORT[/PROTOCOL][:NAME]" ("8080", "53/udp", "8080/tcp:http") and back (the protocol always
// written). InvalidArgument naming the text and what is wrong.
std::string FormatTaskPort(const TaskPort& port);
// "8080" → 8080: digits only, 1..65535.
Result<int> ParsePortNumber(const std::string& text);
Result<TaskPort> ParseTaskPort(const std::string& text);

// "8080/tcp:http=30001@node-3" (the store's form) and back. InvalidArgument naming the text.
std::string FormatTaskEndpoint(const TaskEndpoint& endpoint);
Result<TaskEndpoint> ParseTaskEndpoint(const std::string& text);

}  // namespace gpupool
