// RunWithRetry: runs one piece of SQL work on a PgConnection and maps what libpqxx throws to a
// Status, reconnecting once when a connection that had been working turns out dead. Shared by
// PgStore's files; only store/ includes it (it pulls in libpqxx).
#pragma once

#include <pqxx/pqxx>
#include <utility>

#include "store/pg_conn.h"

namespace gpupool {

// Runs `body(connection)` on `pc` and maps what libpqxx throws to a Status. When a connection
// that had been working turns out dead (the server restarted since its last use), reconnects and
// runs `body` once more: safe, because nothing was committed — a connection lost during COMMIT
// itself is in doubt and is never retried.
template <typename Body>
auto RunWithRetry(PgConnection& pc, const PgTarget& target, Body&& body)
    -> decltype(body(std::declval<pqxx::connection&>())) {
  for (int attempt = 0;; ++attempt) {
    bool reused = pc.connected();
    GPUPOOL_ASSIGN_OR_RETURN(pqxx::connection * conn, pc.Get());
    try {
      return body(*conn);
    } catch (const pqxx::in_doubt_error& e) {
      Status st = PgErrorToStatus(e, target);
      pc.Reset(st);
      return st;
    } catch (const std::exception& e) {
      Status st = PgErrorToStatus(e, target);
      bool lost = IsConnectionLevel(st) || !conn->is_open();
      if (lost) pc.Reset(st);
      if (lost && reused && attempt == 0) continue;
      return st;
    }
  }
}

}  // namespace gpupool
