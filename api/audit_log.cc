#include "api/audit_log.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <future>

#include "api/utf8.h"
#include "base/log.h"
#include "scheduler/store.h"

namespace gpupool::api {
namespace {

constexpr size_t kMaxField = 1024;

std::string Clean(std::string_view s) {
  std::string out = ValidUtf8(s.substr(0, kMaxField));
  std::erase(out, '\0');
  // Cutting may split a character; ValidUtf8 replaced the stray bytes with U+FFFD.
  return out;
}

AuditRecord ToRecord(AuditEntry e) {
  AuditRecord r;
  r.time_us = e.time_us;
  r.key_id = Clean(e.actor.key_id);
  r.principal = Clean(e.actor.principal);
  r.role = Clean(e.actor.role);
  r.tenant = Clean(e.tenant);
  r.verb = Clean(e.verb);
  r.resource = Clean(e.resource);
  r.code = static_cast<int32_t>(e.code);
  r.message = Clean(e.message);
  r.request_id = Clean(e.request_id);
  r.source = Clean(e.source);
  return r;
}

}  // namespace

struct AuditLog::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : written(prometheus::BuildCounter()
                    .Name("gpupool_audit_records_written_total")
                    .Help("Audit records committed to the audit log.")
                    .Register(r)
                    .Add({})),
        dropped(&prometheus::BuildCounter()
                     .Name("gpupool_audit_records_dropped_total")
                     .Help("Audit records given up, by reason (queue_full: a denied read while "
                           "the queue was full; invalid: refused by the store).")
                     .Register(r)),
        errors(prometheus::BuildCounter()
                   .Name("gpupool_audit_write_errors_total")
                   .Help("Failed audit log appends; the records are kept and retried.")
                   .Register(r)
                   .Add({})),
        pending(prometheus::BuildGauge()
                    .Name("gpupool_audit_pending_records")
                    .Help("Audit records waiting to be written.")
                    .Register(r)
                    .Add({})) {}
  prometheus::Counter& written;
  prometheus::Family<prometheus::Counter>* dropped;
  prometheus::Counter& errors;
  prometheus::Gauge& pending;
};

AuditLog::AuditLog(Store* store, AuditLogOptions options)
    : store_(store), options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
  if (options_.max_batch == 0) options_.max_batch = 1;
  writer_ = std::thread([this] { WriterLoop(); });
  reader_ = std::thread([this] { ReaderLoop(); });
}

AuditLog::~AuditLog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + options_.flush_timeout;
  }
  cv_.notify_all();
  writer_.join();
  reader_.join();
  std::lock_guard lock(mu_);
  if (!queue_.empty()) {
    LogError("api.audit", "audit records lost at shutdown: the database did not take them",
             {{"records", std::to_string(queue_.size())}, {"error", last_error_.ToString()}});
  }
  for (Item& item : queue_) {
    if (item.durable) item.durable();
  }
}

Status AuditLog::AdmitMutation() {
  std::lock_guard lock(mu_);
  if (!failing_) return Status::Ok();
  return Status::Unavailable("the audit log cannot be written (" + std::to_string(queue_.size()) +
                             " records waiting: " + last_error_.message() +
                             "); changes are refused until it can be — retry later");
}

void AuditLog::Record(AuditEntry entry, bool must_keep, std::function<void()> durable) {
  AuditRecord record = ToRecord(std::move(entry));
  {
    std::lock_guard lock(mu_);
    if (must_keep || queue_.size() < options_.max_pending) {
      queue_.push_back({std::move(record), std::move(durable)});
      if (metrics_) metrics_->pending.Set(static_cast<double>(queue_.size()));
      cv_.notify_all();
      return;
    }
  }
  if (metrics_) metrics_->dropped->Add({{"reason", "queue_full"}}).Increment();
  if (durable) durable();
}

size_t AuditLog::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void AuditLog::WriterLoop() {
  std::chrono::milliseconds backoff{0};
  for (;;) {
    std::vector<AuditRecord> batch;
    std::vector<std::function<void()>> durables;
    {
      std::unique_lock lock(mu_);
      if (backoff.count() > 0) {
        cv_.wait_for(lock, backoff, [this] {
          return stopping_ && std::chrono::steady_clock::now() >= stop_deadline_;
        });
      }
      cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty() ||
          (stopping_ && failing_ && std::chrono::steady_clock::now() >= stop_deadline_)) {
        return;
      }
      // Copies: the records stay queued until they are committed.
      for (size_t i = 0; i < queue_.size() && i < options_.max_batch; ++i) {
        batch.push_back(queue_[i].record);
      }
    }
    std::promise<Status> result;
    store_->AppendAudit(batch, [&result](Status st) { result.set_value(std::move(st)); });
    const Status st = result.get_future().get();
    const bool drop = st.code() == StatusCode::kInvalidArgument;
    {
      std::lock_guard lock(mu_);
      // The batch is the head of the queue; each record's `durable` runs after its first try.
      for (size_t i = 0; i < batch.size(); ++i) {
        if (queue_[i].durable) durables.push_back(std::exchange(queue_[i].durable, nullptr));
      }
      if (st.ok() || drop) {
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(batch.size()));
        failing_ = false;
        backoff = std::chrono::milliseconds(0);
      } else {
        if (!failing_) {
          LogWarn("api.audit", "cannot write the audit log; refusing changes until it can",
                  {{"error", st.ToString()}, {"records", std::to_string(queue_.size())}});
        }
        failing_ = true;
        last_error_ = st;
        backoff = std::min(std::max(backoff * 2, std::chrono::milliseconds(100)),
                           std::chrono::milliseconds(5000));
      }
      if (metrics_) metrics_->pending.Set(static_cast<double>(queue_.size()));
    }
    if (metrics_) {
      if (st.ok()) metrics_->written.Increment(static_cast<double>(batch.size()));
      if (drop) {
        metrics_->dropped->Add({{"reason", "invalid"}})
            .Increment(static_cast<double>(batch.size()));
      }
      if (!st.ok() && !drop) metrics_->errors.Increment();
    }
    if (drop)
      LogError("api.audit", "audit records refused by the store", {{"error", st.ToString()}});
    for (auto& d : durables) d();
  }
}

void AuditLog::List(AuditQuery query, std::function<void(Result<AuditPage>)> done) {
  std::lock_guard lock(mu_);
  reads_.push_back(
      [this, query = std::move(query), done = std::move(done)] { done(store_->ListAudit(query)); });
  cv_.notify_all();
}

void AuditLog::ReaderLoop() {
  for (;;) {
    std::function<void()> read;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !reads_.empty() || stopping_; });
      if (reads_.empty()) return;
      read = std::move(reads_.front());
      reads_.pop_front();
    }
    read();
  }
}

}  // namespace gpupool::api
