// The device_slots table (migration 35): SQL for SetDeviceSlots and the reader for Recover().
// Internal to store/; declared in pg_sql.h.
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_sql.h"

namespace gpupool {

const char* const kSelectDeviceSlots =
    "SELECT node, device, slots, set_by, set_us "
    "FROM device_slots ORDER BY node COLLATE \"C\", device COLLATE \"C\"";

void AppendDeviceSlotsSql(std::string* o, const DeviceSlotsRecord& s) {
  if (s.slots <= 0) {  // back to the pool's default: no row
    *o += "DELETE FROM device_slots WHERE node=";
    AppendQuoted(o, s.node);
    *o += " AND device=";
    AppendQuoted(o, s.device);
    *o += ";\n";
    return;
  }
  *o += "INSERT INTO device_slots (node, device, slots, set_by, set_us) VALUES (";
  AppendQuoted(o, s.node), *o += ',';
  AppendQuoted(o, s.device), *o += ',';
  *o += std::to_string(s.slots) + ",";
  AppendQuoted(o, s.set_by), *o += ',';
  *o += std::to_string(s.set_us);
  *o +=
      ") ON CONFLICT (node, device) DO UPDATE SET slots=EXCLUDED.slots, set_by=EXCLUDED.set_by, "
      "set_us=EXCLUDED.set_us;\n";
}

std::vector<DeviceSlotsRecord> ReadDeviceSlots(const pqxx::result& rows) {
  std::vector<DeviceSlotsRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    DeviceSlotsRecord s;
    s.node = r[0].c_str();
    s.device = r[1].c_str();
    s.slots = r[2].as<int32_t>();
    s.set_by = r[3].c_str();
    s.set_us = r[4].as<int64_t>();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpupool
