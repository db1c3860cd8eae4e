#include "cmd/daemon/fencer.h"

#include <utility>

#include "base/log.h"
#include "base/run_tool.h"

namespace gpupool {
namespace {

constexpr char kComponent[] = "fencer";

}  // namespace

NodeFencer::NodeFencer(FencingOptions options, AdminPort* admin, const Clock* clock,
                       std::function<void(const FenceAttempt&)> on_attempt)
    : options_(std::move(options)),
      admin_(admin),
      clock_(clock),
      on_attempt_(std::move(on_attempt)) {}

NodeFencer::~NodeFencer() { Stop(); }

void NodeFencer::Start() {
  if (options_.command.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void NodeFencer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeFencer::Loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, options_.poll, [this] { return stopping_; })) return;
    }
    Pass();
  }
}

void NodeFencer::Pass() {
  // The scheduler answers while it runs; the fencer is stopped before it (cmd/gpupoold.cc).
  Result<std::vector<NodeView>> listed =
      CallAndGet<std::vector<NodeView>>([&](SchedulerCallback<std::vector<NodeView>> cb) {
        admin_->ListNodes("", [cb](std::vector<NodeView> v) { cb(std::move(v)); });
      });
  const int64_t now = clock_->MonotonicMicros();
  std::map<std::string, Silent> still;
  for (const NodeView& v : *listed) {
    // Only a silent node that holds work: fencing one with nothing on it releases nothing.
    if (v.node.state != NodeState::kNotReady || v.running_tasks == 0) continue;
    auto known = silent_.find(v.node.name);
    Silent s =
        known != silent_.end() ? known->second : Silent{now + options_.after_ms * 1000, false};
    if (!s.fenced && now >= s.due_us) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
      }
      Fence(v, &s);
    }
    still.emplace(v.node.name, s);
  }
  silent_ = std::move(still);  // nodes that came back, or hold nothing now, are forgotten
}

void NodeFencer::Fence(const NodeView& node, Silent* silent) {
  const std::string& name = node.node.name;
  ToolRun run;
  run.argv = options_.command;
  run.argv.push_back(name);
  run.env = {"GPUPOOL_NODE=" + name, "GPUPOOL_POOL=" + node.node.pool};
  run.timeout_ms = options_.timeout_ms;
  LogWarn(kComponent, "node silent and holding tasks; running the fencing command",
          {{"node", name},
           {"command", options_.command.front()},
           {"tasks", std::to_string(node.running_tasks)}});
  Status outcome;
  Result<ToolResult> ran = RunTool(run);
  if (!ran.ok()) {
    outcome = ran.status().WithContext("fencing command " + options_.command.front());
  } else if (!ran->ok()) {
    outcome =
        Status::Unavailable("fencing command " + options_.command.front() + " " + ran->Describe());
  } else {
    const std::string by = "the fencing command " + options_.command.front();
    Result<NodeView> fenced = CallAndGet<NodeView>(
        [&](SchedulerCallback<NodeView> cb) { admin_->FenceNode(name, by, cb); });
    outcome = fenced.status();
  }
  if (outcome.ok()) {
    silent->fenced = true;
    LogWarn(kComponent, "node fenced; its tasks are requeued", {{"node", name}});
  } else {
    silent->due_us = clock_->MonotonicMicros() + options_.retry_ms * 1000;
    LogWarn(kComponent, "node not fenced: its tasks stay until its lease lapses",
            {{"node", name},
             {"error", outcome.message()},
             {"retry_in_ms", std::to_string(options_.retry_ms)}});
  }
  if (on_attempt_) on_attempt_(FenceAttempt{name, outcome});
}

}  // namespace gpupool
