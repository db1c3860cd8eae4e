// libFuzzer target: gpupool-agent's YAML config (agent/config.h), parsed and then validated the
// way the agent does at start.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string yaml(reinterpret_cast<const char*>(data), size);
  auto config = gpupool::agent::ParseAgentConfig(yaml, "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().message().empty()) __builtin_trap();  // errors say why
    return 0;
  }
  (void)gpupool::agent::ValidateAgentConfig(&*config);
  return 0;
}
