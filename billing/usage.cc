#include "billing/usage.h"

namespace gpupool::billing {

std::string_view UnitName(Unit unit) {
  switch (unit) {
    case Unit::kTflopsHour:
      return "tflops-hour";
    case Unit::kVramGibHour:
      return "vram-gib-hour";
    case Unit::kDeviceHour:
      return "device-hour";
    case Unit::kMigProfileHour:
      return "mig-profile-hour";
    case Unit::kSpillGibHour:
      return "spill-gib-hour";
    case Unit::kSlotHour:
      return "slot-hour";
  }
  return "unknown";
}

std::optional<Unit> ParseUnit(std::string_view name) {
  for (Unit u : kAllUnits) {
    if (UnitName(u) == name) return u;
  }
  return std::nullopt;
}

int64_t BasePerUnitHour(Unit unit) {
  switch (unit) {
    case Unit::kTflopsHour:
      return 1000 * 3600;  // milli-TFLOPS x seconds
    case Unit::kVramGibHour:
    case Unit::kSpillGibHour:
      return 1024 * 3600;  // MiB x seconds
    case Unit::kDeviceHour:
    case Unit::kMigProfileHour:
    case Unit::kSlotHour:
      return 3600;  // x seconds
  }
  return 1;
}

std::string_view BaseMeasureName(Unit unit) {
  switch (unit) {
    case Unit::kTflopsHour:
      return "milli-tflops-seconds";
    case Unit::kVramGibHour:
    case Unit::kSpillGibHour:
      return "mib-seconds";
    case Unit::kDeviceHour:
      return "device-seconds";
    case Unit::kMigProfileHour:
      return "instance-seconds";
    case Unit::kSlotHour:
      return "slot-seconds";
  }
  return "unknown";
}

}  // namespace gpupool::billing
