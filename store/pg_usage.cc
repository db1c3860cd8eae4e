// The usage ledger on PostgreSQL (migration 70): SQL for AppendUsage and RollUpUsage, the
// recovery marks, and the report query. Internal to store/; declared in pg_usage.h.
//
// Exactness: every quantity is a bigint; sums are cast back to bigint (PostgreSQL sums bigints
// as numeric, so nothing wraps on the way). Text is ordered COLLATE "C" so the report comes in
// the byte order MemoryStore uses.
#include "store/pg_usage.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"

namespace gpupool {
namespace {

constexpr const char* kDayUs = "86400000000";

void N(std::string* o, int64_t v) { *o += std::to_string(v); }
void Q(std::string* o, std::string_view s) { AppendQuoted(o, s); }
void C(std::string* o) { o->push_back(','); }

// The sums a report and a roll-up carry, in the tables' column names.
constexpr const char* kSumCols[] = {
    "milli_tflops_s", "physical_milli_tflops_s", "vram_mib_s",   "spill_mib_s",
    "device_s",       "mig_instance_s",          "cpu_usage_us", "slot_s"};

std::string PeriodSql(UsagePeriod p) {
  switch (p) {
    case UsagePeriod::kHour:
      return "(s / 3600000000) * 3600000000";
    case UsagePeriod::kDay:
      return std::string("(s / ") + kDayUs + ") * " + kDayUs;
    case UsagePeriod::kMonth:
      return "(extract(epoch FROM date_trunc('month', to_timestamp(s / 1000000) AT TIME ZONE "
             "'UTC')) * 1000000)::bigint";
  }
  return "s";
}

// The query's filters over a table whose interval start is `start`.
std::string Where(const UsageQuery& q, const char* start) {
  std::string w = std::string(start) + " >= ";
  N(&w, q.from_us);
  if (q.to_us != 0) {
    w += std::string(" AND ") + start + " < ";
    N(&w, q.to_us);
  }
  if (!q.tenant.empty()) {
    w += " AND (tenant = ";
    Q(&w, q.tenant);
    w += " OR left(tenant, ";
    N(&w, static_cast<int64_t>(q.tenant.size()) + 1);
    w += ") = ";
    Q(&w, q.tenant + "/");
    w += ")";
  }
  auto eq = [&w](const char* col, const std::string& v) {
    if (v.empty()) return;
    w += std::string(" AND ") + col + " = ";
    Q(&w, v);
  };
  eq("pool", q.pool);
  eq("model", q.model);
  eq("priority_class", q.priority_class);
  return w;
}

// Whether the attempt of the usage_ledger row aliased `row` ended by preemption: its last
// interval says PREEMPTED (usage_ledger_preempted_idx, migration 71, makes this a lookup).
std::string PreemptedSql(const char* row) {
  const std::string r(row);
  return "EXISTS (SELECT 1 FROM usage_ledger e WHERE e.job_id = " + r +
         ".job_id AND e.task_index = " + r + ".task_index AND e.attempt = " + r +
         ".attempt AND e.end_state = 'PREEMPTED')";
}

}  // namespace

void AppendUsageSql(std::string* o, const AppendUsage& m) {
  if (m.intervals.empty()) return;
  *o +=
      "INSERT INTO usage_ledger (job_id, task_index, attempt, start_us, end_us, tenant, pool, "
      "node, model, sharing_mode, priority_class, mig_profile, milli_tflops_s, "
      "physical_milli_tflops_s, vram_mib_s, spill_mib_s, device_s, mig_instance_s, cpu_usage_us, "
      "slot_s, peak_memory_bytes, end_state, service, recorded_us) VALUES ";
  bool first = true;
  for (const UsageInterval& u : m.intervals) {
    if (!first) C(o);
    first = false;
    o->push_back('(');
    N(o, u.job_id), C(o), N(o, u.task_index), C(o), N(o, u.attempt), C(o), N(o, u.start_us);
    C(o), N(o, u.end_us), C(o), Q(o, u.tenant), C(o), Q(o, u.pool), C(o), Q(o, u.node), C(o);
    Q(o, u.model), C(o), Q(o, ToString(u.sharing_mode)), C(o), Q(o, u.priority_class), C(o);
    Q(o, u.mig_profile), C(o);
    const UsageTotals& t = u.totals;
    N(o, t.milli_tflops_seconds), C(o), N(o, t.physical_milli_tflops_seconds), C(o);
    N(o, t.vram_mib_seconds), C(o), N(o, t.spill_mib_seconds), C(o), N(o, t.device_seconds);
    C(o), N(o, t.mig_instance_seconds), C(o), N(o, t.cpu_usage_us), C(o);
    N(o, t.slot_seconds), C(o);
    N(o, t.peak_memory_bytes), C(o), Q(o, ToString(u.end)), C(o), Q(o, u.service);
    *o += ",(extract(epoch FROM clock_timestamp()) * 1000000)::bigint)";
  }
  *o += " ON CONFLICT (job_id, task_index, attempt, start_us) DO NOTHING;\n";
}

void AppendRollUpSql(std::string* o, const RollUpUsage& m) {
  std::string sums, max_peak, updates;
  for (const char* c : kSumCols) {
    sums += std::string(", sum(") + c + ")::bigint";
    updates += std::string(", ") + c + " = usage_daily." + c + " + EXCLUDED." + c;
  }
  *o += "WITH moved AS (DELETE FROM usage_ledger u WHERE u.start_us < ";
  N(o, m.before_us);
  *o +=
      " AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.job_id = u.job_id AND t.idx = "
      "u.task_index AND t.attempt = u.attempt AND t.state IN ('SCHEDULED', 'RUNNING')) "
      "RETURNING *) "
      "INSERT INTO usage_daily (day_us, tenant, pool, node, model, sharing_mode, priority_class, "
      "mig_profile, service, preempted, milli_tflops_s, physical_milli_tflops_s, vram_mib_s, "
      "spill_mib_s, "
      "device_s, mig_instance_s, cpu_usage_us, slot_s, peak_memory_bytes, intervals) "
      "SELECT (start_us / ";
  *o += kDayUs;
  *o += ") * ";
  *o += kDayUs;
  // The EXISTS sees the ledger as it was before the DELETE (one snapshot for the statement),
  // so an attempt's earlier intervals find its PREEMPTED last one even when both move now.
  *o += ", tenant, pool, node, model, sharing_mode, priority_class, mig_profile, service, " +
        PreemptedSql("moved") + sums +
        ", max(peak_memory_bytes), count(*) FROM moved GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 "
        "ON CONFLICT (day_us, tenant, pool, node, model, sharing_mode, priority_class, "
        "mig_profile, service, preempted) DO UPDATE SET peak_memory_bytes = "
        "greatest(usage_daily.peak_memory_bytes, "
        "EXCLUDED.peak_memory_bytes), intervals = usage_daily.intervals + EXCLUDED.intervals" +
        updates + ";\n";
}

const char* const kSelectUsageMarks =
    "SELECT t.job_id, t.idx, t.attempt, m.end_us FROM tasks t CROSS JOIN LATERAL "
    "(SELECT max(end_us) AS end_us FROM usage_ledger u WHERE u.job_id = t.job_id AND "
    "u.task_index = t.idx AND u.attempt = t.attempt) m "
    "WHERE t.state IN ('SCHEDULED', 'RUNNING') AND m.end_us IS NOT NULL ORDER BY t.job_id, t.idx";

std::vector<UsageMark> ReadUsageMarks(const pqxx::result& rows) {
  std::vector<UsageMark> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    out.push_back({r[0].as<int64_t>(), r[1].as<int32_t>(), r[2].as<int32_t>(), r[3].as<int64_t>()});
  }
  return out;
}

std::string UsageReportSql(const UsageQuery& q) {
  std::string cols;
  for (const char* c : kSumCols) cols += std::string(", ") + c;
  std::string tenant = "tenant";
  if (q.tenant_depth > 0) {
    tenant = "array_to_string((string_to_array(tenant, '/'))[1:" + std::to_string(q.tenant_depth) +
             "], '/')";
  }
  const std::string ledger_pre = q.split_preempted ? PreemptedSql("l") : "false";
  const std::string daily_pre = q.split_preempted ? "preempted" : "false";
  std::string sql = "SELECT * FROM (SELECT " + PeriodSql(q.period) + " AS p, " + tenant +
                    " AS tn, pool, model, priority_class, mig_profile, service";
  for (const char* c : kSumCols) sql += std::string(", sum(") + c + ")::bigint";
  sql += ", max(peak_memory_bytes), sum(n)::bigint, pre FROM (";
  sql += "SELECT start_us AS s, tenant, pool, model, priority_class, mig_profile, service" + cols +
         ", peak_memory_bytes, 1 AS n, " + ledger_pre + " AS pre FROM usage_ledger l WHERE " +
         Where(q, "start_us");
  sql += " UNION ALL SELECT day_us, tenant, pool, model, priority_class, mig_profile, service" +
         cols + ", peak_memory_bytes, intervals, " + daily_pre + " FROM usage_daily WHERE " +
         Where(q, "day_us");
  sql +=
      ") u GROUP BY 1, 2, 3, 4, 5, 6, 7, pre) g ORDER BY p, tn COLLATE \"C\", pool COLLATE \"C\", "
      "model COLLATE \"C\", priority_class COLLATE \"C\", mig_profile COLLATE \"C\", "
      "service COLLATE \"C\", pre";
  return sql;
}

std::vector<UsageReportRow> ReadUsageReport(const pqxx::result& rows) {
  std::vector<UsageReportRow> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    UsageReportRow row;
    row.period_start_us = r[0].as<int64_t>();
    row.tenant = r[1].c_str();
    row.pool = r[2].c_str();
    row.model = r[3].c_str();
    row.priority_class = r[4].c_str();
    row.mig_profile = r[5].c_str();
    row.service = r[6].c_str();
    UsageTotals& t = row.totals;
    t.milli_tflops_seconds = r[7].as<int64_t>();
    t.physical_milli_tflops_seconds = r[8].as<int64_t>();
    t.vram_mib_seconds = r[9].as<int64_t>();
    t.spill_mib_seconds = r[10].as<int64_t>();
    t.device_seconds = r[11].as<int64_t>();
    t.mig_instance_seconds = r[12].as<int64_t>();
    t.cpu_usage_us = r[13].as<int64_t>();
    t.slot_seconds = r[14].as<int64_t>();
    t.peak_memory_bytes = r[15].as<int64_t>();
    t.intervals = r[16].as<int64_t>();
    row.preempted = r[17].as<bool>();
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace gpupool
