// InTxn: runs one piece of SQL work in one transaction on a PgConnection that a class owns
// alone (PgApiKeyStore, PgNodeEnrolments), mapping what libpqxx throws to a Status and dropping
// a broken connection so that the next call reconnects. Unlike RunWithRetry (store/pg_retry.h)
// it does not try again: these callers answer one request and its client retries.
//
// Only store/ includes this header (it pulls in libpqxx).
//
// Thread safety: as the PgConnection (the caller serialises calls).
#pragma once

#include <pqxx/pqxx>

#include "store/pg_conn.h"

namespace gpupool {

template <typename T, typename Fn>
Result<T> InTxn(PgConnection& conn, Fn fn) {
  Result<pqxx::connection*> c = conn.Get();
  if (!c.ok()) return c.status();
  try {
    pqxx::work txn(**c);
    T out = fn(txn);
    txn.commit();
    return out;
  } catch (const std::exception& e) {
    Status s = PgErrorToStatus(e, conn.target());
    if (IsConnectionLevel(s)) conn.Reset(s);
    return s;
  }
}

}  // namespace gpupool
