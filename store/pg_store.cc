#include "store/pg_store.h"

#include <unistd.h>

#include <future>
#include <pqxx/pqxx>

#include "base/log.h"
#include "store/migrations.h"
#include "store/pg_columns.h"
#include "store/pg_conn.h"
#include "store/pg_report_pool.h"
#include "store/pg_retry.h"
#include "store/pg_secrets.h"
#include "store/pg_sql.h"
#include "store/pg_usage.h"
#include "store/validate.h"

namespace gpupool {
namespace {

std::string DefaultHolder() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

// "job/12" → "job/12%" with LIKE's wildcards escaped, as a quoted literal.
std::string LikePrefix(const std::string& prefix) {
  std::string pattern;
  for (char c : prefix) {
    if (c == '%' || c == '_' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += '%';
  std::string out;
  AppendQuoted(&out, pattern);
  return out;
}

}  // namespace

Result<std::unique_ptr<PgStore>> PgStore::Open(PgStoreOptions options) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(options.uri));
  if (options.holder.empty()) options.holder = DefaultHolder();
  if (options.max_group == 0) options.max_group = 1;
  auto target_ptr = std::make_unique<PgTarget>(target);
  std::unique_ptr<PgStore> store(new PgStore(std::move(options), std::move(target_ptr)));
  {
    std::lock_guard lock(store->read_mu_);
    GPUPOOL_ASSIGN_OR_RETURN(pqxx::connection * conn, store->read_conn_->Get());
    Status st = Migrate(*conn, target.display);
    if (st.ok() && store->options_.keyring != nullptr) {
      try {
        st = AdoptSecretKeys(*conn, *store->options_.keyring, target.display);
      } catch (const std::exception& e) {
        st = PgErrorToStatus(e, target).WithContext("secrets at rest");
      }
    }
    if (!st.ok()) {
      if (IsConnectionLevel(st)) store->read_conn_->Reset(st);
      return st;
    }
  }
  LogInfo("store", "opened PostgreSQL store", {{"db", target.display}});
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

PgStore::PgStore(PgStoreOptions options, std::unique_ptr<PgTarget> target)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : SystemClock::Get()),
      target_(std::move(target)),
      writer_conn_(std::make_unique<PgConnection>(*target_, "writer")),
      read_conn_(std::make_unique<PgConnection>(*target_, "reader")),
      audit_conn_(std::make_unique<PgConnection>(*target_, "audit")),
      report_pool_(
          std::make_unique<PgReportPool>(*target_, options_.report_connections,
                                         std::chrono::milliseconds(options_.report_timeout_ms))) {}

PgStore::~PgStore() {
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

const std::string& PgStore::display() const { return target_->display; }

PgStore::Stats PgStore::stats() const {
  return Stats{stat_transactions_.load(), stat_batches_.load(), stat_failed_.load()};
}

Result<int64_t> PgStore::AcquireLeadership() {
  std::lock_guard lock(read_mu_);
  Result<int64_t> epoch =
      RunWithRetry(*read_conn_, *target_, [&](pqxx::connection& conn) -> Result<int64_t> {
        pqxx::work txn(conn);
        // A single daemon: no address, so gp_fence does not look at the expiry.
        std::string sql = "UPDATE leader SET epoch = epoch + 1, address = '', holder = ";
        AppendQuoted(&sql, options_.holder);
        sql +=
            ", lease_us = " + std::to_string(clock_->NowMicros()) + " WHERE id = 1 RETURNING epoch";
        pqxx::result r = txn.exec(sql);
        txn.commit();
        if (r.size() != 1) return Status::Internal("store: the leader row is missing");
        return r[0][0].as<int64_t>();
      });
  if (epoch.ok()) {
    epoch_.store(*epoch);
    LogInfo("store", "acquired leadership",
            {{"epoch", std::to_string(*epoch)}, {"holder", options_.holder}});
  }
  return epoch;
}

Result<RecoveredState> PgStore::Recover() {
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_, [&](pqxx::connection& conn) -> Result<RecoveredState> {
    const SecretKeyring* ring = options_.keyring.get();
    if (ring != nullptr) {
      GPUPOOL_ASSIGN_OR_RETURN(ResealCounts resealed,
                               ResealSecrets(conn, *ring, clock_->NowMicros() / 1000));
      last_reseal_ = Reseal{ring->current_id(),    resealed.jobs,
                            resealed.credentials,  resealed.registry_credentials,
                            resealed.retired_keys, resealed.webhooks};
      if (resealed.jobs + resealed.credentials + resealed.registry_credentials + resealed.webhooks +
              resealed.retired_keys >
          0) {
        LogInfo("store", "secrets re-sealed under the current key",
                {{"key", ring->current_id()},
                 {"jobs", std::to_string(resealed.jobs)},
                 {"credentials", std::to_string(resealed.credentials)},
                 {"registry_credentials", std::to_string(resealed.registry_credentials)},
                 {"webhooks", std::to_string(resealed.webhooks)},
                 {"retired_keys", std::to_string(resealed.retired_keys)}});
      }
    }
    // One snapshot for every table, so jobs and tasks agree.
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> txn(conn);
    RecoveredState state;
    GPUPOOL_ASSIGN_OR_RETURN(state.pools, ReadPools(txn.exec(kSelectPools)));
    GPUPOOL_ASSIGN_OR_RETURN(
        state.nodes,
        ReadNodes(txn.exec(kSelectNodes), txn.exec(kSelectDevices), txn.exec(kSelectLinks)));
    GPUPOOL_ASSIGN_OR_RETURN(state.jobs,
                             ReadJobs(txn.exec(kSelectJobs), txn.exec(kSelectTasks),
                                      txn.exec(kSelectAllocations), ring, JobSecrets::kOpen));
    state.tenants = ReadTenants(txn.exec(kSelectTenants));
    state.quotas = ReadQuotas(txn.exec(kSelectQuotas));
    state.device_faults = ReadDeviceFaults(txn.exec(kSelectDeviceFaults));
    state.device_slots = ReadDeviceSlots(txn.exec(kSelectDeviceSlots));
    GPUPOOL_ASSIGN_OR_RETURN(state.mig_layouts, ReadMigLayouts(txn.exec(kSelectMigLayouts)));
    state.usage_marks = ReadUsageMarks(txn.exec(kSelectUsageMarks));
    txn.commit();
    state.max_job_id = state.jobs.empty() ? 0 : state.jobs.back().id;
    return state;
  });
}

PgStore::Reseal PgStore::last_reseal() const {
  std::lock_guard lock(read_mu_);
  return last_reseal_;
}

Result<std::vector<EventRecord>> PgStore::ListEvents(const std::string& subject_prefix, int limit) {
  std::string sql = "SELECT " GP_EVENT_COLS " FROM events WHERE subject LIKE " +
                    LikePrefix(subject_prefix) + " ESCAPE '\\' ORDER BY id";
  if (limit > 0) sql += " LIMIT " + std::to_string(limit);
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_,
                      [&](pqxx::connection& conn) -> Result<std::vector<EventRecord>> {
                        pqxx::nontransaction txn(conn);
                        return ReadEvents(txn.exec(sql));
                      });
}

Result<std::vector<UsageReportRow>> PgStore::QueryUsage(const UsageQuery& query) {
  GPUPOOL_RETURN_IF_ERROR(ValidateUsageQuery(query));
  const std::string sql = UsageReportSql(query);
  std::vector<UsageReportRow> rows;
  GPUPOOL_RETURN_IF_ERROR(report_pool_->Run("usage report", [&](pqxx::transaction_base& txn) {
    rows = ReadUsageReport(txn.exec(sql));
    return Status::Ok();
  }));
  return rows;
}

void PgStore::SetReportLimits(int connections, int64_t timeout_ms) {
  report_pool_->SetLimits(connections, std::chrono::milliseconds(timeout_ms));
}

Status PgStore::Ping() {
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_, [](pqxx::connection& conn) -> Status {
    pqxx::nontransaction txn(conn);
    txn.exec("SELECT 1");
    return Status::Ok();
  });
}

Status PgStore::CheckWritable(std::chrono::milliseconds timeout) {
  // Shared, so a late answer after a timeout writes into a live promise.
  auto done = std::make_shared<std::promise<Status>>();
  std::future<Status> result = done->get_future();
  Apply({}, [done](Status st) { done->set_value(std::move(st)); });
  if (result.wait_for(timeout) != std::future_status::ready) {
    return Status(StatusCode::kDeadlineExceeded, "database " + target_->display +
                                                     ": no commit within " +
                                                     std::to_string(timeout.count()) + " ms");
  }
  return result.get();
}

void PgStore::Apply(std::vector<Mutation> batch, Done done) {
  bool wake = false;
  {
    std::lock_guard lock(queue_mu_);
    queue_.push_back(Pending{std::move(batch), std::move(done)});
    wake = writer_idle_;
  }
  if (wake) queue_cv_.notify_one();
}

void PgStore::WriterLoop() {
  std::vector<Pending> group;
  for (;;) {
    {
      std::unique_lock lock(queue_mu_);
      for (;;) {
        if (!queue_.empty() || stopping_) break;
        if (writer_conn_->connected()) {
          writer_idle_ = true;
          queue_cv_.wait(lock);
          writer_idle_ = false;
          continue;
        }
        // Down and idle: reconnect in the background once the backoff has passed, so the store
        // is ready when the database is back.
        writer_idle_ = true;
        bool timed_out =
            queue_cv_.wait_until(lock, writer_conn_->next_attempt()) == std::cv_status::timeout;
        writer_idle_ = false;
        if (timed_out && queue_.empty() && !stopping_) {
          lock.unlock();
          (void)writer_conn_->Get();
          lock.lock();
        }
      }
      if (queue_.empty() && stopping_) return;
      while (!queue_.empty() && group.size() < options_.max_group) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitGroup(group);
    group.clear();
  }
}

Status PgStore::WriteTransaction(const std::vector<Pending*>& group, int64_t epoch) {
  return RunWithRetry(*writer_conn_, *target_, [&](pqxx::connection& conn) -> Status {
    GroupSql sql(epoch, clock_->NowMicros(), options_.keyring.get());
    for (const Pending* p : group) {
      for (const Mutation& m : p->batch) sql.Add(m);
    }
    GPUPOOL_ASSIGN_OR_RETURN(std::string text, sql.Finish());
    pqxx::work txn(conn);
    txn.exec(text);
    txn.commit();
    stat_transactions_++;
    return Status::Ok();
  });
}

void PgStore::CommitGroup(std::vector<Pending>& group) {
  std::vector<Status> results(group.size());
  std::vector<Pending*> valid;
  std::vector<size_t> valid_index;
  int64_t epoch = epoch_.load();
  for (size_t i = 0; i < group.size(); ++i) {
    results[i] = epoch == 0
                     ? Status::FailedPrecondition("store: AcquireLeadership() was not called")
                     : ValidateBatch(group[i].batch);
    if (results[i].ok()) {
      valid.push_back(&group[i]);
      valid_index.push_back(i);
    }
  }
  if (!valid.empty()) {
    Status st = WriteTransaction(valid, epoch);
    bool isolate = !st.ok() && valid.size() > 1 && st.code() != StatusCode::kUnavailable &&
                   st.code() != StatusCode::kAborted;
    if (!isolate) {
      for (size_t i : valid_index) results[i] = st;
    } else {
      // One batch broke the group: give each batch its own transaction and its own answer.
      for (size_t k = 0; k < valid.size(); ++k) {
        results[valid_index[k]] = WriteTransaction({valid[k]}, epoch);
      }
    }
  }
  for (size_t i = 0; i < group.size(); ++i) {
    (results[i].ok() ? stat_batches_ : stat_failed_)++;
    if (group[i].done) group[i].done(results[i]);
  }
}

}  // namespace gpupool
