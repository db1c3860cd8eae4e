// The mig_layouts table (migration 39): SQL for PutMigLayout and the reader for Recover().
// Internal to store/; declared in pg_sql.h.
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_sql.h"

namespace gpupool {

const char* const kSelectMigLayouts =
    "SELECT node, gpu, layout, generation, state, reason, set_by, updated_us "
    "FROM mig_layouts ORDER BY node COLLATE \"C\", gpu COLLATE \"C\"";

void AppendMigLayoutSql(std::string* o, const MigLayoutRecord& l) {
  *o +=
      "INSERT INTO mig_layouts (node, gpu, layout, generation, state, reason, set_by, "
      "updated_us) VALUES (";
  AppendQuoted(o, l.node), *o += ',';
  AppendQuoted(o, l.gpu), *o += ',';
  AppendQuoted(o, l.layout), *o += ',';
  *o += std::to_string(l.generation) + ",";
  AppendQuoted(o, ToString(l.state)), *o += ',';
  AppendQuoted(o, l.reason), *o += ',';
  AppendQuoted(o, l.set_by), *o += ',';
  *o += std::to_string(l.updated_us);
  *o +=
      ") ON CONFLICT (node, gpu) DO UPDATE SET layout=EXCLUDED.layout, "
      "generation=EXCLUDED.generation, state=EXCLUDED.state, reason=EXCLUDED.reason, "
      "set_by=EXCLUDED.set_by, updated_us=EXCLUDED.updated_us;\n";
}

Result<std::vector<MigLayoutRecord>> ReadMigLayouts(const pqxx::result& rows) {
  std::vector<MigLayoutRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    MigLayoutRecord l;
    l.node = r[0].c_str();
    l.gpu = r[1].c_str();
    l.layout = r[2].c_str();
    l.generation = r[3].as<int64_t>();
    const std::optional<MigLayoutState> state = ParseMigLayoutState(r[4].c_str());
    if (!state) {
      return Status(StatusCode::kDataLoss, "mig_layouts: unknown state '" +
                                               std::string(r[4].c_str()) + "' for GPU " + l.gpu +
                                               " of node " + l.node);
    }
    l.state = *state;
    l.reason = r[5].c_str();
    l.set_by = r[6].c_str();
    l.updated_us = r[7].as<int64_t>();
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace gpupool
