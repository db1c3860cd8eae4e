// PostgreSQL connection plumbing shared by PgStore and EmbeddedPostgres: parsing a connection URI,
// turning libpqxx exceptions into Status, and one connection that reconnects with backoff.
//
// Only store/ includes this header (it pulls in libpqxx).
//
// Thread safety: PgTarget is a value; PgConnection is NOT thread-safe (one owner at a time).
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <pqxx/connection>
#include <string>

#include "base/status.h"

namespace gpupool {

// A parsed connection string: what libpq gets, and what a person reads in messages and logs
// (host:port/dbname, never the password).
struct PgTarget {
  // keyword=value form; connect_timeout (5 s) and TCP keepalives added unless given;
  // client_encoding=UTF8 and standard_conforming_strings=on always.
  std::string conninfo;
  std::string display;  // "127.0.0.1:5432/gpupool"
};

// Accepts "postgresql://user:pw@host:port/db?opt=…" or "host=… port=…". INVALID_ARGUMENT when
// libpq cannot parse it.
Result<PgTarget> ParsePgTarget(const std::string& uri);

// Maps an exception thrown by libpqxx to a Status:
//   connection lost / refused, server shutting down → UNAVAILABLE ("database unavailable: …")
//   connection lost during COMMIT                  → UNAVAILABLE (says the outcome is unknown)
//   our own SQLSTATEs from gp_require()/gp_fence() → NOT_FOUND, ALREADY_EXISTS, ABORTED, …
//   unique violation → ALREADY_EXISTS; data exceptions (class 22) → INVALID_ARGUMENT
//   anything else                                  → INTERNAL
Status PgErrorToStatus(const std::exception& e, const PgTarget& target);

// True for errors after which the connection must be dropped and opened again.
bool IsConnectionLevel(const Status& status);

// Appends `text` as a single-quoted SQL literal. Valid because every connection we open sets
// standard_conforming_strings=on and client_encoding=UTF8 (so backslashes are ordinary and no
// multibyte character contains a quote byte). REQUIRES: no NUL bytes (ValidateBatch checks).
void AppendQuoted(std::string* out, std::string_view text);

// One connection that opens on demand and, after a failure, waits before trying again
// (100 ms doubling to 5 s; the first attempt after a working connection broke is immediate, as
// the server may just have restarted). Sessions get synchronous_commit=on when the server has it
// off.
class PgConnection {
 public:
  PgConnection(PgTarget target, std::string role);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // A live connection, connecting first if needed. UNAVAILABLE while the database cannot be
  // reached (without trying again before the backoff has passed).
  Result<pqxx::connection*> Get();

  // Drops the connection after `why` (a connection-level error); the next Get() reconnects.
  void Reset(const Status& why);

  bool connected() const { return conn_ != nullptr; }
  // When the next connection attempt may be made.
  std::chrono::steady_clock::time_point next_attempt() const { return next_attempt_; }
  const PgTarget& target() const { return target_; }

 private:
  PgTarget target_;
  std::string role_;
  std::unique_ptr<pqxx::connection> conn_;
  std::chrono::milliseconds backoff_{0};
  std::chrono::steady_clock::time_point next_attempt_{};
  Status last_error_;
  bool was_down_ = false;
};

}  // namespace gpupool
