// The audit_log table is append-only on PostgreSQL itself: UPDATE, DELETE and TRUNCATE are refused
// even for the role gpupoold connects as (the table's owner), so a compromised daemon or a stray
// psql session cannot rewrite history without first dropping the triggers (docs/security.md).
#include <gtest/gtest.h>

#include <future>
#include <pqxx/pqxx>

#include "store/pg_store.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::testing {
namespace {

std::string Refusal(const std::string& uri, const std::string& sql) {
  pqxx::connection c(uri);
  try {
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(PgAuditLog, UpdateDeleteAndTruncateAreRefused) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  PgStoreOptions o;
  o.uri = uri;
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(o));
  AuditRecord r;
  r.time_us = 1;
  r.verb = "CreatePool";
  r.resource = "pool/gpu";
  std::promise<Status> p;
  store->AppendAudit({r}, [&p](Status st) { p.set_value(std::move(st)); });
  ASSERT_OK(p.get_future().get());

  EXPECT_NE(Refusal(uri, "UPDATE audit_log SET verb = 'GetPool'").find("append-only: UPDATE"),
            std::string::npos);
  EXPECT_NE(Refusal(uri, "DELETE FROM audit_log").find("append-only: DELETE"), std::string::npos);
  EXPECT_NE(Refusal(uri, "TRUNCATE audit_log").find("append-only: TRUNCATE"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(AuditPage page, store->ListAudit({}));
  ASSERT_EQ(page.records.size(), 1u);
  EXPECT_EQ(page.records[0].verb, "CreatePool");
}

}  // namespace
}  // namespace gpupool::testing
