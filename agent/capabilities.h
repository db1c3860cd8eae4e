// NodeCapabilities: what this node can and cannot enforce, for Register and the start-up log —
// the sandbox's own list (or "sandbox off"), then MPS, VRAM scrub and XID events. A mode the
// node cannot enforce is listed with enforced = false and the reason, never left out.
//
// Thread safety: pure function of the runner's options.
#pragma once

#include <string>
#include <vector>

#include "agent/backend.h"
#include "agent/sandbox/sandbox.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

// `backend` (may be null) says how XID/ECC events are watched (DeviceBackend::EventSource).
std::vector<sandbox::Capability> NodeCapabilities(const TaskRunnerOptions& runner,
                                                  const DeviceBackend* backend = nullptr);

}  // namespace gpupool::agent
