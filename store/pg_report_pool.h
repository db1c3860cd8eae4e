// PgReportPool: the connections heavy read-only reports run on (the usage report, and so the
// invoices and usage feed rated from it), apart from PgStore's writer, reader and audit
// connections. A report that scans months of ledger therefore never holds the connection that
// commits submissions and the core's batches, nor the one recovery, readiness probes and event
// reads use.
//
// Bounded: at most `size` reports run at once. One more is refused at once with
// RESOURCE_EXHAUSTED ("N usage reports are running; retry later") instead of queueing behind
// them, so a burst of reports cannot pile up threads or connections. Each report runs in a
// read-only transaction with `SET LOCAL statement_timeout`, so one that runs past the limit is
// cancelled by PostgreSQL and answered DEADLINE_EXCEEDED naming the limit, releasing its
// connection and snapshot. Connections open on first use and reconnect with PgConnection's
// backoff; a connection error is UNAVAILABLE as elsewhere in the store.
//
// Only store/ includes this header (it pulls in libpqxx).
//
// SetLimits() changes both at once (a configuration reload): a smaller size takes effect as
// running reports finish, a new timeout for the next report.
//
// Thread safety: Run() and SetLimits() may be called from any thread; each connection has one
// user at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "store/pg_conn.h"

namespace pqxx {
class transaction_base;
}

namespace gpupool {

class PgReportPool {
 public:
  // At most `size` (>= 1) reports at once, each at most `timeout` (> 0). Connections open on
  // first use.
  PgReportPool(const PgTarget& target, int size, std::chrono::milliseconds timeout);
  ~PgReportPool();
  PgReportPool(const PgReportPool&) = delete;
  PgReportPool& operator=(const PgReportPool&) = delete;

  // Runs `body` in a read-only transaction on a free connection. `what` names the report in
  // errors ("usage report").
  Status Run(const std::string& what, const std::function<Status(pqxx::transaction_base&)>& body);

  // `size` >= 1, `timeout` > 0 (smaller values are raised to those).
  void SetLimits(int size, std::chrono::milliseconds timeout) GPUPOOL_EXCLUDES(mu_);

 private:
  struct Slot {
    std::unique_ptr<PgConnection> conn;  // used only by whoever marked the slot busy
    bool busy = false;
  };
  // A free slot's index and connection (marking it busy), or -1 when `limit_` reports run
  // (`*limit` says how many that is).
  int Acquire(PgConnection** conn, int* limit) GPUPOOL_EXCLUDES(mu_);
  void Release(int slot) GPUPOOL_EXCLUDES(mu_);

  const PgTarget target_;
  std::atomic<int64_t> timeout_ms_;
  Mutex mu_;
  int limit_ GPUPOOL_GUARDED_BY(mu_);
  // Grows up to the largest limit set; the connections sit in unique_ptrs, so a slot's
  // connection stays put when the vector grows.
  std::vector<Slot> slots_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
