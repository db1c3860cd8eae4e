// PgStore::QueryPoolHistory (scheduler/pool_history.h): a pool's recent tasks for a what-if
// replay, read in one read-only snapshot.
//
// The cut is made in SQL, so neither the tasks nor their jobs are read beyond the bound: the
// first max_tasks + 1 tasks in (submit_us, job_id, idx) order (migration 100's index on
// jobs (pool, submit_us) finds the window), then those tasks and their jobs through the
// recovery readers (pg_rows.cc). The one row beyond the bound tells FinishPoolHistory that the
// window was truncated. No allocation is read: a replay places the tasks itself.
#include <pqxx/pqxx>

#include "store/pg_columns.h"
#include "store/pg_conn.h"
#include "store/pg_retry.h"
#include "store/pg_sql.h"
#include "store/pg_store.h"

namespace gpupool {
namespace {

// "WITH sel AS (…)": the (job_id, idx) of the tasks the query selects, one beyond the bound.
std::string SelectedTasks(const PoolHistoryQuery& q) {
  std::string s =
      "WITH sel AS (SELECT t.job_id, t.idx FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE "
      "j.pool = ";
  AppendQuoted(&s, q.pool);
  s += " AND j.submit_us >= " + std::to_string(q.from_us) + " AND j.submit_us < " +
       std::to_string(q.to_us) + " ORDER BY j.submit_us, t.job_id, t.idx LIMIT " +
       std::to_string(int64_t{q.max_tasks} + 1) + ") ";
  return s;
}

}  // namespace

Result<PoolHistory> PgStore::QueryPoolHistory(const PoolHistoryQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidatePoolHistoryQuery(query));
  const std::string sel = SelectedTasks(query);
  const std::string jobs_sql =
      sel + "SELECT " GP_JOB_COLS " FROM jobs WHERE id IN (SELECT job_id FROM sel) ORDER BY id";
  const std::string tasks_sql = sel + "SELECT " GP_TASK_COLS
                                      " FROM tasks WHERE (job_id, idx) IN (SELECT job_id, idx "
                                      "FROM sel) ORDER BY job_id, idx";
  const std::string no_allocations = "SELECT " GP_ALLOC_COLS " FROM allocations WHERE false";
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_, [&](pqxx::connection& conn) -> Result<PoolHistory> {
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn);
    Result<std::vector<JobRecord>> jobs =
        ReadJobs(txn.exec(jobs_sql), txn.exec(tasks_sql), txn.exec(no_allocations), nullptr,
                 JobSecrets::kOmit);
    txn.commit();
    if (!jobs.ok()) return jobs.status();
    std::vector<PoolHistoryTask> rows;
    for (const JobRecord& job : *jobs) AppendPoolHistory(job, query, &rows);
    return FinishPoolHistory(std::move(rows), query);
  });
}

}  // namespace gpupool
