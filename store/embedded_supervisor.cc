#include "store/embedded_supervisor.h"

#include <algorithm>
#include <string>

#include "base/log.h"
#include "store/embedded_postgres.h"

namespace gpupool {

EmbeddedSupervisor::EmbeddedSupervisor(EmbeddedPostgres* pg, EmbeddedSupervisorOptions options)
    : pg_(pg), options_(options), thread_([this] { Loop(); }) {}

EmbeddedSupervisor::~EmbeddedSupervisor() { Stop(); }

void EmbeddedSupervisor::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EmbeddedSupervisor::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stopping_; });
}

void EmbeddedSupervisor::Loop() {
  pid_t last = pg_->ServerPid();
  while (SleepFor(options_.interval)) {
    if (pg_->ServerPid() > 0) {
      last = pg_->ServerPid();
      continue;
    }
    LogError("store", "embedded PostgreSQL died; restarting it",
             {{"pid", std::to_string(last)},
              {"dir", pg_->cluster_dir()},
              {"port", std::to_string(pg_->port())}});
    auto started = std::chrono::steady_clock::now();
    std::chrono::milliseconds backoff = options_.interval;
    for (int attempt = 1;; ++attempt) {
      Status st = pg_->RestartAfterCrash();
      if (st.ok()) {
        ++restarts_;
        last = pg_->ServerPid();
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - started);
        LogWarn("store", "embedded PostgreSQL restarted after a crash",
                {{"pid", std::to_string(last)},
                 {"port", std::to_string(pg_->port())},
                 {"attempts", std::to_string(attempt)},
                 {"took_ms", std::to_string(took.count())}});
        break;
      }
      LogError("store", "embedded PostgreSQL restart failed; retrying",
               {{"attempt", std::to_string(attempt)},
                {"retry_ms", std::to_string(backoff.count())},
                {"error", st.ToString()}});
      if (!SleepFor(backoff)) return;
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

}  // namespace gpupool
