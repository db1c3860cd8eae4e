// gpupoold's `fencing:` section (cmd/daemon/fencer.h, docs/ha.md "Fencing"): the command that
// powers a silent node off, and when it runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {

struct FencingOptions {
  std::vector<std::string> command;      // argv; the node's name is appended. Empty: no fencer.
  int64_t after_ms = 30'000;             // silent (NOT_READY) this long, holding tasks
  int64_t timeout_ms = 120'000;          // a command running longer is killed: failed
  int64_t retry_ms = 60'000;             // after a failure, the next try
  std::chrono::milliseconds poll{1000};  // how often the nodes are looked at
  friend bool operator==(const FencingOptions&, const FencingOptions&) = default;
};

}  // namespace gpupool
