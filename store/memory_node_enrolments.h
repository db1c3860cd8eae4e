// MemoryNodeEnrolments: the NodeEnrolmentStore port (scheduler/node_enrolments.h) in memory, for
// tests that do not need a database. It passes the same conformance suite as the PostgreSQL
// implementation (tests/store/node_enrolment_conformance.cc). Several handles may share one
// table (Share()), the way several replicas share one database; nothing survives the process.
//
// Thread safety: every method may be called from any thread (one mutex per table).
#pragma once

#include <map>
#include <memory>

#include "base/mutex.h"
#include "scheduler/node_enrolments.h"

namespace gpupool {

class MemoryNodeEnrolments final : public NodeEnrolmentStore {
 public:
  MemoryNodeEnrolments();
  // Another handle on this one's table.
  std::unique_ptr<MemoryNodeEnrolments> Share() const;

  Result<std::optional<NodeEnrolment>> Get(const std::string& node) override;
  Status Bind(const NodeEnrolment& e, const std::string& expected_serial) override;
  Status Revoke(const std::string& node) override;
  Result<int> Import(const std::vector<NodeEnrolment>& rows) override;

 private:
  struct Table {
    Mutex mu;
    std::map<std::string, NodeEnrolment> rows GPUPOOL_GUARDED_BY(mu);
  };
  explicit MemoryNodeEnrolments(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  std::shared_ptr<Table> table_;
};

}  // namespace gpupool
