// What-if configs: a YAML file naming what a second replay changes from the first (gpupool-twin
// --what-if FILE). Every key is optional; what is absent stays as the baseline has it.
//
//   label: fifo-no-preempt      # the name in the report (default "candidate")
//   strategy: best-fit          # the pool's placement strategy
//   preemption: false
//   queue_order: fifo           # fair-share | fifo
//   compute_overcommit: 1.5     # the pool's compute ratio (decimal, ≥ 1)
//   resume: remaining           # preempted tasks run what was left (default: full)
//   org_tree: other-org.yaml    # another org tree (quotas, qos → class); relative to the file
//
// Errors are INVALID_ARGUMENT "FILE:LINE: key: message" (unknown key, unknown strategy, …).
// Thread safety: plain functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "twin/twin.h"

namespace gpupool::twin {

struct WhatIf {
  TwinConfig config;                    // the baseline with the file's changes applied
  std::optional<std::string> org_tree;  // a path, resolved against the file's folder
};

Result<WhatIf> ParseWhatIf(std::string_view yaml, const std::string& source,
                           const TwinConfig& base);
Result<WhatIf> LoadWhatIf(const std::string& path, const TwinConfig& base);

}  // namespace gpupool::twin
