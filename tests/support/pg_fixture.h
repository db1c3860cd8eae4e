// Throwaway PostgreSQL servers for tests (library gpupool_test_pg).
//
// CreateTestDatabase() is what most tests want: the first call starts one server for the whole
// test binary (initdb --no-sync, fsync=off, a free port, socket and data in a fresh /tmp
// directory, run as the "postgres" user when the tests run as root); every call creates a new
// empty database on it and returns its URI. The server is stopped and its directory deleted when
// the binary exits — and by a small watchdog process if the binary dies first (crash, timeout).
//
// Tests that need PostgreSQL never skip: when the server cannot start, these return the error
// (with the reason from initdb/pg_ctl) and the test must fail with it, e.g.
//   ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
//
// TestPostgres::Start() gives a test its own server to stop and restart (outage tests), or one
// with fsync on (durability tests).
//
// Thread safety: CreateTestDatabase() may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "store/embedded_postgres.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {

class TestPostgres {
 public:
  struct Options {
    bool fsync = false;
  };
  // A fresh server in a new temporary directory.
  static Result<std::unique_ptr<TestPostgres>> Start(Options options);
  static Result<std::unique_ptr<TestPostgres>> Start() { return Start(Options{}); }
  // Stops the server and deletes the directory.
  ~TestPostgres();

  EmbeddedPostgres& server() { return *server_; }
  const std::string& dir() const { return dir_; }
  // Creates a uniquely named empty database and returns its URI.
  Result<std::string> CreateDatabase();

 private:
  TestPostgres() = default;
  std::string dir_;
  std::unique_ptr<EmbeddedPostgres> server_;
  int watchdog_fd_ = -1;  // closing it (or dying) makes the watchdog clean up
};

// A new empty database on the binary's shared server (started on first use).
Result<std::string> CreateTestDatabase();

// The shared server itself (started on first use).
Result<TestPostgres*> SharedTestPostgres();

}  // namespace gpupool::testing
