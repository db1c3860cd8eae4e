#include "store/pg_report_pool.h"

#include <pqxx/pqxx>

#include "store/pg_retry.h"

namespace gpupool {
namespace {

// PostgreSQL's query_canceled: what statement_timeout raises.
constexpr const char* kQueryCanceled = "57014";

}  // namespace

PgReportPool::PgReportPool(const PgTarget& target, int size, std::chrono::milliseconds timeout)
    : target_(target), timeout_ms_(0), limit_(1) {
  SetLimits(size, timeout);
}

PgReportPool::~PgReportPool() = default;

void PgReportPool::SetLimits(int size, std::chrono::milliseconds timeout) {
  timeout_ms_.store(std::max<int64_t>(timeout.count(), 1));
  MutexLock lock(&mu_);
  limit_ = std::max(size, 1);
}

int PgReportPool::Acquire(PgConnection** conn, int* limit) {
  MutexLock lock(&mu_);
  *limit = limit_;
  for (int i = 0; i < limit_; ++i) {
    if (static_cast<size_t>(i) == slots_.size()) {
      slots_.push_back(
          Slot{std::make_unique<PgConnection>(target_, "report-" + std::to_string(i)), false});
    }
    Slot& s = slots_[static_cast<size_t>(i)];
    if (!s.busy) {
      s.busy = true;
      *conn = s.conn.get();
      return i;
    }
  }
  return -1;
}

void PgReportPool::Release(int slot) {
  MutexLock lock(&mu_);
  slots_[static_cast<size_t>(slot)].busy = false;
}

Status PgReportPool::Run(const std::string& what,
                         const std::function<Status(pqxx::transaction_base&)>& body) {
  PgConnection* pc = nullptr;
  int limit = 0;
  const int slot = Acquire(&pc, &limit);
  if (slot < 0) {
    return Status::ResourceExhausted(what + ": " + std::to_string(limit) +
                                     " already running, the most allowed at once; retry later");
  }
  const int64_t timeout_ms = timeout_ms_.load();
  struct Releaser {
    PgReportPool* pool;
    int slot;
    ~Releaser() { pool->Release(slot); }
  } releaser{this, slot};
  return RunWithRetry(*pc, target_, [&](pqxx::connection& conn) -> Status {
    pqxx::read_transaction txn(conn);
    txn.exec("SET LOCAL statement_timeout = " + std::to_string(timeout_ms));
    try {
      GPUPOOL_RETURN_IF_ERROR(body(txn));
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != kQueryCanceled) throw;
      return Status(StatusCode::kDeadlineExceeded,
                    what + " ran past its time limit of " + std::to_string(timeout_ms) +
                        " ms and was cancelled; narrow the period or filters");
    }
    txn.commit();
    return Status::Ok();
  });
}

}  // namespace gpupool
