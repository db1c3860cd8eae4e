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
// Thread safety: Run() may be called from any thread; each connection has one user at a time.
#pragma once

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
  // `size` >= 1 connections; `timeout` > 0.
  PgReportPool(const PgTarget& target, int size, std::chrono::milliseconds timeout);
  ~PgReportPool();
  PgReportPool(const PgReportPool&) = delete;
  PgReportPool& operator=(const PgReportPool&) = delete;

  // Runs `body` in a read-only transaction on a free connection. `what` names the report in
  // errors ("usage report").
  Status Run(const std::string& what, const std::function<Status(pqxx::transaction_base&)>& body);

  int size() const { return static_cast<int>(conns_.size()); }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // A free connection's index, or -1 when all are busy.
  int Acquire() GPUPOOL_EXCLUDES(mu_);
  void Release(int slot) GPUPOOL_EXCLUDES(mu_);

  const PgTarget target_;
  const std::chrono::milliseconds timeout_;
  // Fixed at construction; conns_[i] is used only by whoever holds slot i.
  std::vector<std::unique_ptr<PgConnection>> conns_;
  Mutex mu_;
  std::vector<bool> busy_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
