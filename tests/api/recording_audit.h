// RecordingAudit: an AuditSink for tests that keeps every record in memory (always admits,
// runs `durable` at once).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api/audit.h"

namespace gpupool::api::testing {

class RecordingAudit final : public AuditSink {
 public:
  Status AdmitMutation() override { return Status::Ok(); }
  void Record(AuditEntry e, bool, std::function<void()> durable) override {
    {
      std::lock_guard lock(mu_);
      entries_.push_back(std::move(e));
    }
    if (durable) durable();
  }
  // The records of `verb`, in the order they came.
  std::vector<AuditEntry> Of(const std::string& verb) {
    std::lock_guard lock(mu_);
    std::vector<AuditEntry> out;
    for (const AuditEntry& e : entries_) {
      if (e.verb == verb) out.push_back(e);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<AuditEntry> entries_;
};

}  // namespace gpupool::api::testing
