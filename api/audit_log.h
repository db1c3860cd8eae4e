// AuditLog: the AuditSink of gpupoold — records from both API faces, written to the Store port's
// append-only audit log (Store::AppendAudit) by one writer thread, and read back for
// AuditService / GET /v1/audit (List).
//
// The writer takes everything queued (up to `max_batch` records) and appends it in one
// transaction, so a burst of submissions costs one commit, not one each. When an append fails
// (the database is down), the records stay at the head of the queue and are retried with
// backoff (100 ms doubling to 5 s); meanwhile AdmitMutation() answers UNAVAILABLE, so mutating
// calls are refused until the backlog is written (api/audit.h has the whole policy). Records that
// may be dropped (denied reads) are refused once `max_pending` records wait.
//
// Text fields are made valid UTF-8 without NUL and cut to 1 KiB (the store would refuse them
// otherwise, and a record the store refuses forever would block the queue); a batch the store
// still refuses as INVALID_ARGUMENT is dropped and counted rather than retried.
//
// Metrics (prometheus, when a registry is given):
//   gpupool_audit_records_written_total     records committed
//   gpupool_audit_records_dropped_total     records given up: {reason="queue_full"|"invalid"}
//   gpupool_audit_write_errors_total        failed appends (each is retried)
//   gpupool_audit_pending_records           records waiting to be written
//
// Lifetime: the Store outlives the AuditLog; destroy the AuditLog after the API servers stopped.
// The destructor writes what is queued, trying for up to `flush_timeout`.
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "api/audit.h"
#include "scheduler/audit_record.h"

namespace prometheus {
class Registry;
}

namespace gpupool {
class Store;
}

namespace gpupool::api {

struct AuditLogOptions {
  std::shared_ptr<prometheus::Registry> metrics;  // null = no metrics
  size_t max_batch = 500;
  size_t max_pending = 100'000;
  std::chrono::milliseconds flush_timeout{2000};
};

class AuditLog final : public AuditSink {
 public:
  explicit AuditLog(Store* store, AuditLogOptions options = {});
  ~AuditLog() override;
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  Status AdmitMutation() override;
  void Record(AuditEntry entry, bool must_keep, std::function<void()> durable) override;

  // Reads a page on a reader thread of its own; `done` runs there.
  void List(AuditQuery query, std::function<void(Result<AuditPage>)> done);

  // Records waiting to be written (tests, /metrics).
  size_t pending() const;

 private:
  struct Metrics;
  struct Item {
    AuditRecord record;
    std::function<void()> durable;
  };
  void WriterLoop();
  void ReaderLoop();

  Store* store_;
  AuditLogOptions options_;
  std::unique_ptr<Metrics> metrics_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;                               // guarded by mu_
  bool failing_ = false;                                 // guarded by mu_: the last append failed
  Status last_error_;                                    // guarded by mu_
  bool stopping_ = false;                                // guarded by mu_
  std::chrono::steady_clock::time_point stop_deadline_;  // guarded by mu_
  std::deque<std::function<void()>> reads_;              // guarded by mu_

  std::thread writer_;
  std::thread reader_;
};

}  // namespace gpupool::api
