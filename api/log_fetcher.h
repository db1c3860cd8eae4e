// LogFetcher: the port through which the API reads a task's output from the node that runs it.
//
// AgentHub (api/agent_hub.h) implements it over the agents' streams (FetchLogs → LogChunk);
// ServiceImpl::GetTaskLogs drives it, polling when the caller follows the output.
//
// Thread safety: implementations are thread-safe; `done` may run on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace gpupool::api {

// A piece of a task's combined stdout/stderr.
struct LogRead {
  int64_t offset = 0;  // where `data` starts
  std::string data;
  bool eof = false;  // the agent has sent everything written so far
};

class LogFetcher {
 public:
  using Done = std::function<void(Result<LogRead>)>;
  virtual ~LogFetcher() = default;

  // Asks the agent on `node` for up to `max_bytes` of `task_id`'s output from `offset`. Calls
  // `done` exactly once, unless the returned function (which abandons the request) runs first:
  // with the data; UNAVAILABLE "node X is not connected" when there is no agent or it goes away
  // before answering; NOT_FOUND / INTERNAL with the agent's error. Must not block.
  virtual std::function<void()> FetchLogs(const std::string& node, const std::string& task_id,
                                          int64_t offset, int64_t max_bytes, Done done) = 0;
};

}  // namespace gpupool::api
