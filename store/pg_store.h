// PgStore: the Store port on PostgreSQL (libpqxx 6.4), with group commit and epoch fencing.
//
// Open() connects, applies the schema migrations (store/migrations.h) and starts one writer
// thread that owns one connection. Apply() only enqueues; the writer takes everything queued (up
// to `max_group` batches), writes all of it in ONE transaction — the epoch check first, then
// each table's rows as multi-row statements, all sent in one round trip — commits, and only then
// calls each `done` with OK. If that transaction fails for anything but an outage or fencing, the
// writer retries each batch in its own transaction so one bad batch fails alone. Reads
// (Recover, ListEvents) and AcquireLeadership use a second connection.
//
// Outages: while PostgreSQL is down or restarting, calls fail fast with UNAVAILABLE ("database
// unavailable: 127.0.0.1:5432/gpupool: Connection refused; retrying in 400 ms"); both
// connections reconnect by themselves with backoff (100 ms doubling to 5 s) and the store works
// again once the database is back. Nothing is acknowledged before COMMIT returns; a connection
// lost during COMMIT itself is reported as UNAVAILABLE saying the outcome is unknown.
//
// Thread safety: every method may be called from any thread. `done` runs on the writer thread,
// in the order the batches were enqueued.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/crypto/secret_box.h"
#include "scheduler/store.h"

namespace gpupool {

class PgConnection;
class PgReportPool;
struct PgTarget;

struct PgStoreOptions {
  // "postgresql://user:password@host:port/dbname" or "host=… dbname=…".
  std::string uri;
  // Stamps the leader lease; the system clock when null.
  const Clock* clock = nullptr;
  // Most batches folded into one transaction.
  size_t max_group = 512;
  // Recorded in the leader row; "<hostname>:<pid>" when empty.
  std::string holder;
  // Usage reports (QueryUsage) run on connections of their own (store/pg_report_pool.h): at
  // most this many at once (one more is RESOURCE_EXHAUSTED), each cancelled after
  // report_timeout_ms (DEADLINE_EXCEEDED).
  int report_connections = 2;
  int64_t report_timeout_ms = 60'000;
  // Seals secrets at rest (store/pg_secrets.h). gpupoold always gives one; without it a job with
  // secret env is refused (FAILED_PRECONDITION) and a sealed value read by Recover is an error.
  std::shared_ptr<const SecretKeyring> keyring;
};

class PgStore final : public Store {
 public:
  // Connects and migrates. UNAVAILABLE when the database cannot be reached; INVALID_ARGUMENT for
  // a malformed URI; FAILED_PRECONDITION when the schema is newer than this build, or when the
  // database holds secrets sealed with a key that options.keyring lacks (naming it).
  static Result<std::unique_ptr<PgStore>> Open(PgStoreOptions options);

  // Finishes every batch already enqueued (committed or failed), then closes the connections.
  ~PgStore() override;

  Result<int64_t> AcquireLeadership() override;
  // Replicas: the epoch a PgLeaderLease on the same database took (instead of
  // AcquireLeadership); every write is fenced by it from now on.
  void UseEpoch(int64_t epoch) { epoch_.store(epoch); }
  // With a keyring, first re-seals every secret under its current key and retires older keys
  // (store/pg_secrets.h): only the leader recovers, so only the leader writes there.
  Result<RecoveredState> Recover() override;
  // What the last Recover re-sealed (for the audit log; all zero when nothing was).
  struct Reseal {
    std::string key;  // the current key's id
    int64_t jobs = 0;
    int64_t credentials = 0;
    int64_t registry_credentials = 0;
    int64_t retired_keys = 0;
    int64_t webhooks = 0;
  };
  Reseal last_reseal() const;
  void Apply(std::vector<Mutation> batch, Done done) override;
  // A cheap round trip ("SELECT 1") on the read connection, for readiness probes: OK, or
  // UNAVAILABLE naming the database while it is down (reconnecting with the usual backoff).
  Status Ping();
  // Readiness that means "a submission would commit": an empty batch through the writer, i.e. a
  // fenced transaction (gp_fence renews the lease) on the very connection that commits
  // submissions, grouped with whatever else is queued. OK once it committed; UNAVAILABLE while
  // the database or the writer's connection is down (or in its reconnect backoff), ABORTED when
  // fenced, DEADLINE_EXCEEDED after `timeout`.
  Status CheckWritable(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  Result<std::vector<EventRecord>> ListEvents(const std::string& subject_prefix,
                                              int limit) override;
  // The audit log (store/pg_audit.cc): appends run on the caller's thread on a connection of
  // their own (one multi-row INSERT per call, never fenced), so an audit backlog never waits
  // behind scheduling commits; `done` runs before AppendAudit returns. Reads use the reader.
  void AppendAudit(std::vector<AuditRecord> records, Done done) override;
  Result<AuditPage> ListAudit(const AuditQuery& query) override;
  // The usage report (store/pg_usage.cc), on the report connections (bounded, with a statement
  // timeout; see PgStoreOptions), never on the writer's or the reader's.
  Result<std::vector<UsageReportRow>> QueryUsage(const UsageQuery& query) override;
  // A configuration reload's new report limits (PgStoreOptions' report_*); thread-safe.
  void SetReportLimits(int connections, int64_t timeout_ms);
  Result<PoolHistory> QueryPoolHistory(const PoolHistoryQuery& query) override;  // pg_history.cc
  // Price plans (store/pg_price_plans.cc): writes on the audit connection, reads on the reader.
  Result<billing::PricePlan> AddPricePlan(billing::PricePlan plan, bool create) override;
  Result<std::vector<billing::PricePlan>> ListPricePlans(const std::string& name) override;

  // Counters since Open(): transactions committed by the writer and batches they carried (their
  // ratio is the mean group size), and batches that failed.
  struct Stats {
    int64_t transactions = 0;
    int64_t batches = 0;
    int64_t failed_batches = 0;
  };
  Stats stats() const;

  // "127.0.0.1:5432/gpupool" — where this store writes, for logs.
  const std::string& display() const;

  struct Pending {
    std::vector<Mutation> batch;
    Done done;
  };

 private:
  PgStore(PgStoreOptions options, std::unique_ptr<PgTarget> target);

  void WriterLoop();
  void CommitGroup(std::vector<Pending>& group);
  // One transaction with every batch in `group`; OK or the first error.
  Status WriteTransaction(const std::vector<Pending*>& group, int64_t epoch);

  const PgStoreOptions options_;
  const Clock* clock_;
  std::unique_ptr<PgTarget> target_;
  std::atomic<int64_t> epoch_{0};
  std::atomic<int64_t> stat_transactions_{0};
  std::atomic<int64_t> stat_batches_{0};
  std::atomic<int64_t> stat_failed_{0};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;  // guarded by queue_mu_
  bool stopping_ = false;      // guarded by queue_mu_
  bool writer_idle_ = false;   // guarded by queue_mu_: the writer waits for work on queue_cv_

  std::unique_ptr<PgConnection> writer_conn_;  // writer thread only
  mutable std::mutex read_mu_;
  std::unique_ptr<PgConnection> read_conn_;  // guarded by read_mu_
  Reseal last_reseal_;                       // guarded by read_mu_
  std::mutex audit_mu_;
  std::unique_ptr<PgConnection> audit_conn_;   // guarded by audit_mu_
  std::unique_ptr<PgReportPool> report_pool_;  // thread-safe

  std::thread writer_;
};

}  // namespace gpupool
