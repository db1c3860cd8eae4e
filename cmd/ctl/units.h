// Human units for gpupoolctl, in and out. The wire speaks integers (milli-TFLOPS, MiB,
// milli-cores, protobuf Durations); people type and read decimals and suffixes.
//
//   ParseTflops("12.5")     → 12500 milli-TFLOPS (at most 3 decimal places, > 0)
//   ParseMemoryMib("20GiB") → 20480; units MiB, GiB, TiB (or Mi, Gi, Ti); binary only —
//                             "20GB" is refused with a hint, a bare number asks for a unit
//   ParseCpuMilli("4")      → 4000; "0.5" → 500; "250m" → 250
//   ParseDurationMs("1h30m")→ 5400000 (pool/duration_text.h, shared with the YAML files)
//   FormatMib(81920)        → "80GiB"; 1536 → "1.5GiB"; 512 → "512MiB"
//
// Errors are InvalidArgument messages naming the value; callers add the flag name.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "pool/duration_text.h"

namespace gpupool::ctl {

Result<int64_t> ParseTflops(std::string_view text);
Result<int64_t> ParseMemoryMib(std::string_view text);
Result<int64_t> ParseCpuMilli(std::string_view text);
using ::gpupool::ParseDurationMs;
// A positive decimal such as an overcommit ratio ("1.5").
Result<double> ParsePositiveDecimal(std::string_view text);
// A non-negative integer in [min, max].
Result<int64_t> ParseInt(std::string_view text, int64_t min, int64_t max);

std::string FormatMib(int64_t mib);
// "1h30m", "45s", "1.5s", "0s".
std::string FormatDurationMs(int64_t ms);
// "120.5/989.5" (no unit; the column header names it).
std::string FormatUsedOf(int64_t used_milli_tflops, int64_t offered_milli_tflops);

}  // namespace gpupool::ctl
