#include "cmd/ctl/units.h"

#include <cctype>
#include <cstdlib>
#include <limits>

#include "pool/resources.h"
#include "pool/yaml_error.h"

namespace gpupool::ctl {

namespace {

std::string Q(std::string_view s) { return "'" + std::string(s) + "'"; }

// Splits "20GiB" into ("20", "GiB").
std::pair<std::string_view, std::string_view> SplitNumber(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  return {text.substr(0, i), text.substr(i)};
}

}  // namespace

Result<int64_t> ParseTflops(std::string_view text) {
  int64_t milli = 0;
  if (!ParseDecimalMilli(text, &milli)) {
    return Status::InvalidArgument("invalid TFLOPS " + Q(text) +
                                   ": want a decimal number such as 12.5 (at most 3 places)");
  }
  if (milli <= 0)
    return Status::InvalidArgument("TFLOPS must be greater than zero, got " + Q(text));
  return milli;
}

Result<int64_t> ParseMemoryMib(std::string_view text) {
  auto [number, unit] = SplitNumber(text);
  int64_t milli = 0;
  if (number.empty() || !ParseDecimalMilli(number, &milli)) {
    return Status::InvalidArgument("invalid memory size " + Q(text) +
                                   ": want e.g. 20GiB or 512MiB");
  }
  int64_t mib_per_unit = 0;
  if (unit == "MiB" || unit == "Mi") {
    mib_per_unit = 1;
  } else if (unit == "GiB" || unit == "Gi") {
    mib_per_unit = 1024;
  } else if (unit == "TiB" || unit == "Ti") {
    mib_per_unit = 1024 * 1024;
  } else if (unit.empty()) {
    return Status::InvalidArgument("memory size " + Q(text) +
                                   " needs a unit: MiB, GiB or TiB (e.g. 20GiB)");
  } else if (unit == "GB" || unit == "MB" || unit == "TB" || unit == "G" || unit == "M") {
    return Status::InvalidArgument("memory size " + Q(text) +
                                   ": use binary units MiB, GiB or TiB (e.g. 20GiB)");
  } else {
    return Status::InvalidArgument("memory size " + Q(text) + ": unknown unit " + Q(unit) +
                                   " (MiB, GiB or TiB)");
  }
  if (milli > std::numeric_limits<int64_t>::max() / mib_per_unit) {
    return Status::InvalidArgument("memory size " + Q(text) + " is too large");
  }
  const int64_t scaled = milli * mib_per_unit;
  if (scaled % 1000 != 0) {
    return Status::InvalidArgument("memory size " + Q(text) + " is not a whole number of MiB");
  }
  if (scaled <= 0) return Status::InvalidArgument("memory size must be greater than zero");
  return scaled / 1000;
}

Result<int64_t> ParseCpuMilli(std::string_view text) {
  if (!text.empty() && text.back() == 'm') {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t m, ParseInt(text.substr(0, text.size() - 1), 1,
                                                 std::numeric_limits<int32_t>::max()));
    return m;
  }
  int64_t milli = 0;
  if (!ParseDecimalMilli(text, &milli) || milli <= 0) {
    return Status::InvalidArgument("invalid CPU amount " + Q(text) +
                                   ": want cores such as 4 or 0.5, or milli-cores such as 500m");
  }
  return milli;
}

Result<double> ParsePositiveDecimal(std::string_view text) {
  int64_t milli = 0;
  if (!ParseDecimalMilli(text, &milli) || milli <= 0) {
    return Status::InvalidArgument("invalid number " + Q(text) +
                                   ": want a positive decimal such as 1.5");
  }
  return static_cast<double>(milli) / 1000.0;
}

Result<int64_t> ParseInt(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char c : text) {
    ok = ok && std::isdigit(static_cast<unsigned char>(c));
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok) return Status::InvalidArgument("invalid number " + Q(text) + ": want a whole number");
  if (v < min || v > max) {
    return Status::InvalidArgument("number " + Q(text) + " is out of range " + std::to_string(min) +
                                   ".." + std::to_string(max));
  }
  return v;
}

std::string FormatMib(int64_t mib) {
  if (mib != 0 && mib % (1024 * 1024) == 0) return std::to_string(mib / (1024 * 1024)) + "TiB";
  if (mib < 1024) return std::to_string(mib) + "MiB";
  // Thousandths of a GiB, rounded to nearest, trimmed: 4864 → "4.75GiB".
  return FormatTflops((mib * 1000 + 512) / 1024) + "GiB";
}

std::string FormatDurationMs(int64_t ms) {
  if (ms == 0) return "0s";
  std::string out;
  if (ms >= 3'600'000) {
    out += std::to_string(ms / 3'600'000) + "h";
    ms %= 3'600'000;
  }
  if (ms >= 60'000) {
    out += std::to_string(ms / 60'000) + "m";
    ms %= 60'000;
  }
  if (ms > 0) out += FormatTflops(ms) + "s";  // milli → "1.5"
  return out;
}

std::string FormatUsedOf(int64_t used_milli_tflops, int64_t offered_milli_tflops) {
  return FormatTflops(used_milli_tflops) + "/" + FormatTflops(offered_milli_tflops);
}

}  // namespace gpupool::ctl
