// NodeCapabilities: what this node can and cannot enforce, for Register and the start-up log —
// the sandbox's own list (or "sandbox off"), then MPS, VRAM scrub and XID events. A mode the
// node cannot enforce is listed with enforced = false and the reason, never left out.
//
// Thread safety: pure function of the runner's options.
#pragma once

#include <vector>

#include "agent/sandbox/sandbox.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

std::vector<sandbox::Capability> NodeCapabilities(const TaskRunnerOptions& runner);

}  // namespace gpupool::agent
