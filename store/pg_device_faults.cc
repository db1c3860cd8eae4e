// The device_faults table (migration 20): SQL for SetDeviceFault and the reader for Recover().
// Internal to store/; declared in pg_sql.h.
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_sql.h"

namespace gpupool {

const char* const kSelectDeviceFaults =
    "SELECT node, device, reason, fault_id, since_us, cleared, cleared_by, cleared_us "
    "FROM device_faults ORDER BY node COLLATE \"C\", device COLLATE \"C\"";

void AppendDeviceFaultSql(std::string* o, const DeviceFaultRecord& f) {
  auto n = [o](int64_t v) { *o += std::to_string(v); };
  *o +=
      "INSERT INTO device_faults (node, device, reason, fault_id, since_us, cleared, "
      "cleared_by, cleared_us) VALUES (";
  AppendQuoted(o, f.node), *o += ',';
  AppendQuoted(o, f.device), *o += ',';
  AppendQuoted(o, f.reason), *o += ',';
  n(f.fault_id), *o += ',';
  n(f.since_us), *o += ',';
  *o += f.cleared ? "true," : "false,";
  AppendQuoted(o, f.cleared_by), *o += ',';
  n(f.cleared_us);
  *o +=
      ") ON CONFLICT (node, device) DO UPDATE SET reason=EXCLUDED.reason, "
      "fault_id=EXCLUDED.fault_id, since_us=EXCLUDED.since_us, cleared=EXCLUDED.cleared, "
      "cleared_by=EXCLUDED.cleared_by, cleared_us=EXCLUDED.cleared_us;\n";
}

std::vector<DeviceFaultRecord> ReadDeviceFaults(const pqxx::result& rows) {
  std::vector<DeviceFaultRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    DeviceFaultRecord f;
    f.node = r[0].c_str();
    f.device = r[1].c_str();
    f.reason = r[2].c_str();
    f.fault_id = r[3].as<int64_t>();
    f.since_us = r[4].as<int64_t>();
    f.cleared = r[5].as<bool>();
    f.cleared_by = r[6].c_str();
    f.cleared_us = r[7].as<int64_t>();
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gpupool
