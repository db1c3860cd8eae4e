// Durations as people write them, shared by gpupoolctl's flags and every YAML file that holds a
// protobuf Duration (api/message_yaml.h): "90s", "30m", "1h30m", "2d", "1.5s", "250ms".
//
//   ParseDurationMs("1h30m") → 5400000; units ms, s, m, h, d, combinable, each number a decimal
//   with at most three places. Zero, signs, bare numbers and unknown units are InvalidArgument
//   naming the text.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace gpupool {

Result<int64_t> ParseDurationMs(std::string_view text);

}  // namespace gpupool
