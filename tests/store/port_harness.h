// Conformance suites for the small ports beside the Store (NodeEnrolmentStore, JoinTokenStore):
// one suite runs against the memory implementation and PostgreSQL, and may open several handles
// on one table, the way replicas share one database.
//
//   using Harness = PortHarness<JoinTokenStore>;
//   INSTANTIATE_TEST_SUITE_P(All, MySuite, ::testing::Values(
//       MemoryPort<JoinTokenStore, MemoryJoinTokens>("memory"),
//       PgPort<JoinTokenStore, PgJoinTokens>("pg")), PortName<JoinTokenStore>);
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "base/status.h"
#include "store/pg_store.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::testing {

// Makes a fresh table; Open() then opens handles on it.
template <typename Port>
class PortHarness {
 public:
  virtual ~PortHarness() = default;
  virtual Status NewTable() = 0;
  virtual Result<std::unique_ptr<Port>> Open() = 0;
};

// In memory: handles Share() the first one's table.
template <typename Port, typename Memory>
class MemoryPortHarness final : public PortHarness<Port> {
 public:
  Status NewTable() override {
    first_ = std::make_unique<Memory>();
    return Status::Ok();
  }
  Result<std::unique_ptr<Port>> Open() override { return std::unique_ptr<Port>(first_->Share()); }

 private:
  std::unique_ptr<Memory> first_;
};

// PostgreSQL: a fresh test database migrated by PgStore::Open; handles are Pg::Open(uri).
template <typename Port, typename Pg>
class PgPortHarness final : public PortHarness<Port> {
 public:
  Status NewTable() override {
    GPUPOOL_ASSIGN_OR_RETURN(uri_, CreateTestDatabase());
    PgStoreOptions o;
    o.uri = uri_;
    return PgStore::Open(o).status();
  }
  Result<std::unique_ptr<Port>> Open() override {
    GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<Pg> s, Pg::Open(uri_));
    return std::unique_ptr<Port>(std::move(s));
  }

 private:
  std::string uri_;
};

template <typename Port>
struct PortFactory {
  std::string name;
  std::function<std::unique_ptr<PortHarness<Port>>()> make;
  friend void PrintTo(const PortFactory& f, std::ostream* os) { *os << f.name; }
};

template <typename Port, typename Memory>
PortFactory<Port> MemoryPort(std::string name) {
  return {std::move(name), [] { return std::make_unique<MemoryPortHarness<Port, Memory>>(); }};
}

template <typename Port, typename Pg>
PortFactory<Port> PgPort(std::string name) {
  return {std::move(name), [] { return std::make_unique<PgPortHarness<Port, Pg>>(); }};
}

template <typename Port>
std::string PortName(const ::testing::TestParamInfo<PortFactory<Port>>& info) {
  return info.param.name;
}

}  // namespace gpupool::testing
