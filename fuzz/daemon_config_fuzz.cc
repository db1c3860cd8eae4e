// libFuzzer target: gpupoold's YAML config (cmd/daemon/config.h). Any text must be accepted or
// refused with an error; nothing may crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cmd/daemon/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto config = gpupool::ParseDaemonConfig(yaml, "fuzz.yaml");
  if (!config.ok() && config.status().message().empty()) __builtin_trap();  // errors say why
  return 0;
}
