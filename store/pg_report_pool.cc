#include "store/pg_report_pool.h"

#include <pqxx/pqxx>

#include "store/pg_retry.h"

namespace gpupool {
namespace {

// PostgreSQL's query_canceled: what statement_timeout raises.
constexpr const char* kQueryCanceled = "57014";

}  // namespace

PgReportPool::PgReportPool(const PgTarget& target, int size, std::chrono::milliseconds timeout)
    : target_(target), timeout_(timeout) {
  const int n = std::max(size, 1);
  for (int i = 0; i < n; ++i) {
    conns_.push_back(std::make_unique<PgConnection>(target_, "report-" + std::to_string(i)));
  }
  MutexLock lock(&mu_);
  busy_.assign(conns_.size(), false);
}

PgReportPool::~PgReportPool() = default;

int PgReportPool::Acquire() {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < busy_.size(); ++i) {
    if (!busy_[i]) {
      busy_[i] = true;
      return static_cast<int>(i);
    }
  }
  return -1;
}

void PgReportPool::Release(int slot) {
  MutexLock lock(&mu_);
  busy_[static_cast<size_t>(slot)] = false;
}

Status PgReportPool::Run(const std::string& what,
                         const std::function<Status(pqxx::transaction_base&)>& body) {
  const int slot = Acquire();
  if (slot < 0) {
    return Status::ResourceExhausted(std::to_string(conns_.size()) + " " + what +
                                     "s are running (the most at once); retry later");
  }
  struct Releaser {
    PgReportPool* pool;
    int slot;
    ~Releaser() { pool->Release(slot); }
  } releaser{this, slot};
  return RunWithRetry(
      *conns_[static_cast<size_t>(slot)], target_, [&](pqxx::connection& conn) -> Status {
        pqxx::read_transaction txn(conn);
        txn.exec("SET LOCAL statement_timeout = " + std::to_string(timeout_.count()));
        try {
          GPUPOOL_RETURN_IF_ERROR(body(txn));
        } catch (const pqxx::sql_error& e) {
          if (e.sqlstate() != kQueryCanceled) throw;
          return Status(StatusCode::kDeadlineExceeded,
                        what + " ran past its time limit of " + std::to_string(timeout_.count()) +
                            " ms and was cancelled; narrow the period or filters");
        }
        txn.commit();
        return Status::Ok();
      });
}

}  // namespace gpupool
