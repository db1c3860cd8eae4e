#include "pool/duration_text.h"

#include <cctype>
#include <limits>
#include <string>

#include "pool/yaml_error.h"

namespace gpupool {

Result<int64_t> ParseDurationMs(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  if (text.empty()) return Status::InvalidArgument("empty duration");
  int64_t total = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t digits = 0;
    while (digits < rest.size() &&
           (std::isdigit(static_cast<unsigned char>(rest[digits])) || rest[digits] == '.')) {
      ++digits;
    }
    const std::string_view number = rest.substr(0, digits);
    size_t letters = digits;
    while (letters < rest.size() && std::isalpha(static_cast<unsigned char>(rest[letters]))) {
      ++letters;
    }
    const std::string_view unit = rest.substr(digits, letters - digits);
    int64_t ms_per_unit = 0;
    if (unit == "ms") ms_per_unit = 1;
    if (unit == "s") ms_per_unit = 1000;
    if (unit == "m") ms_per_unit = 60'000;
    if (unit == "h") ms_per_unit = 3'600'000;
    if (unit == "d") ms_per_unit = 86'400'000;
    int64_t milli = 0;
    if (number.empty() || !ParseDecimalMilli(number, &milli) || ms_per_unit == 0 ||
        milli > std::numeric_limits<int64_t>::max() / ms_per_unit ||
        total > std::numeric_limits<int64_t>::max() - milli * ms_per_unit / 1000) {
      return Status::InvalidArgument("invalid duration " + quoted +
                                     ": want e.g. 90s, 30m, 1h30m or 2d (units ms s m h d)");
    }
    total += milli * ms_per_unit / 1000;
    rest = rest.substr(letters);
  }
  if (total <= 0) return Status::InvalidArgument("duration " + quoted + " must be positive");
  return total;
}

}  // namespace gpupool
