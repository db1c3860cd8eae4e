// NodeFencer: runs the operator's fencing command for a node that went silent holding work, and
// fences it through the scheduler once the command says the node is off (docs/ha.md, "Fencing").
//
// A silent node's tasks wait out its lease (minutes) before they run elsewhere, unless the node
// is known to be down. An admin can say so (`gpupoolctl nodes fence`); with `fencing.command`
// configured, gpupoold finds out by itself: a node NOT_READY for `after_ms` that still holds
// tasks gets `command… NODE` run (environment GPUPOOL_NODE and GPUPOOL_POOL, PATH only; no
// shell), which powers it off through IPMI or a cloud API and exits 0 once it is off. Then the
// fencer calls the scheduler's FenceNode (the fence is stored, event `node.fenced` "fenced by
// the fencing command …", the tasks requeued at once).
//
// A command that exits non-zero, cannot start, or outlives `timeout_ms` (SIGKILLed) fences
// nothing: the node keeps its tasks until its lease lapses, the failure is logged with the
// command's last line of stderr, told to `on_attempt`, and the command is tried again
// `retry_ms` later while the node stays silent. A node that comes back (READY) is forgotten.
//
// Runs on a thread of its own; one command at a time (a hanging command delays the others by
// at most timeout_ms). Started on the leader only, with the scheduler, and stopped before it.
//
// Thread safety: Start/Stop from one controlling thread; `on_attempt` runs on the fencer's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "cmd/daemon/fencing_options.h"
#include "scheduler/scheduler.h"

namespace gpupool {

// One run of the command, as the audit log and the tests see it.
struct FenceAttempt {
  std::string node;
  Status outcome;  // OK: the node was fenced; else why not (the command's failure, the core's)
};

class NodeFencer {
 public:
  NodeFencer(FencingOptions options, AdminPort* admin, const Clock* clock,
             std::function<void(const FenceAttempt&)> on_attempt = nullptr);
  ~NodeFencer();  // Stop()
  NodeFencer(const NodeFencer&) = delete;
  NodeFencer& operator=(const NodeFencer&) = delete;

  void Start();
  // Returns once the thread has ended (a command under way is waited for, up to timeout_ms).
  void Stop();

 private:
  struct Silent {
    int64_t due_us = 0;   // monotonic: when the command may (next) run
    bool fenced = false;  // done: not run again while the node stays silent
  };
  void Loop();
  void Pass();
  void Fence(const NodeView& node, Silent* silent);

  const FencingOptions options_;
  AdminPort* const admin_;
  const Clock* const clock_;
  const std::function<void(const FenceAttempt&)> on_attempt_;
  std::map<std::string, Silent> silent_;  // the fencer's thread only

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpupool
