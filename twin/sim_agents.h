// SimAgents: the twin's AgentGateway. It does not act inside the core's call: each command goes
// to an outbox the twin's event loop empties after the core returns, turning a start into
// "RUNNING after the start latency, SUCCEEDED after the task's duration" and a stop into "exited
// after the stop latency" (twin.h), and a MIG layout into "applied after the re-layout time".
// Every node is connected, so every command is delivered.
//
// Thread safety: none; the twin's one thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "scheduler/dispatch.h"

namespace gpupool::twin {

class SimAgents final : public AgentGateway {
 public:
  struct Command {
    std::string node;
    bool start = false;
    StartTaskCommand start_cmd;  // when start
    StopTaskCommand stop_cmd;    // otherwise
  };

  bool StartTask(const std::string& node, const StartTaskCommand& cmd) override {
    outbox.push_back(Command{node, true, cmd, {}});
    return true;
  }
  bool StopTask(const std::string& node, const StopTaskCommand& cmd) override {
    outbox.push_back(Command{node, false, {}, cmd});
    return true;
  }

  // A layout for a MIG GPU (TwinNode::mig): the twin applies it `relayout_ms` later and
  // registers the node again with the outcome, as an agent does.
  bool SetMigLayout(const std::string& node, const MigLayoutCommand& cmd) override {
    mig_outbox.emplace_back(node, cmd);
    return true;
  }

  std::vector<Command> outbox;
  std::vector<std::pair<std::string, MigLayoutCommand>> mig_outbox;
};

}  // namespace gpupool::twin
