// The usage ledger's SQL (store/pg_usage.cc, migration 70), for PgStore: the statements that
// AppendUsage and RollUpUsage become inside a group's transaction, the recovery marks, and the
// report query with its reader. Internal to store/.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "scheduler/store.h"

namespace pqxx {
class result;
}

namespace gpupool {

// INSERT … ON CONFLICT DO NOTHING of every interval (nothing for an empty list).
void AppendUsageSql(std::string* sql, const AppendUsage& m);
// Moves intervals before the cutoff (of attempts no longer active) into usage_daily, summed.
void AppendRollUpSql(std::string* sql, const RollUpUsage& m);

// For Recover(): the last stored interval end of every SCHEDULED or RUNNING attempt.
extern const char* const kSelectUsageMarks;
std::vector<UsageMark> ReadUsageMarks(const pqxx::result& rows);

// The report: one SELECT over the ledger and the daily roll-ups. REQUIRES: ValidateUsageQuery.
std::string UsageReportSql(const UsageQuery& query);
std::vector<UsageReportRow> ReadUsageReport(const pqxx::result& rows);

}  // namespace gpupool
