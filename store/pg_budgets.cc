#include "store/pg_budgets.h"

#include <charconv>
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_txn.h"

namespace gpupool {
namespace {

constexpr const char* kColumns =
    "tenant, amount_nanos, currency, array_to_string(alert_percents, ','), updated_by, update_ms";

std::vector<int32_t> SplitPercents(const std::string& joined) {
  std::vector<int32_t> out;
  const char* p = joined.data();
  const char* end = p + joined.size();
  while (p < end) {
    int32_t v = 0;
    auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc()) break;
    out.push_back(v);
    if (next == end || *next != ',') break;
    p = next + 1;
  }
  return out;
}

// Thresholds are checked integers, so the array literal needs no quoting.
std::string PercentsLiteral(const std::vector<int32_t>& percents) {
  std::string out = "{";
  for (int32_t p : percents) out += (out.size() > 1 ? "," : "") + std::to_string(p);
  return out + "}";
}

billing::Budget Row(const pqxx::row& r) {
  billing::Budget b;
  b.tenant = r[0].as<std::string>();
  b.amount = billing::Decimal::FromNanos(r[1].as<int64_t>());
  b.currency = r[2].as<std::string>();
  b.alert_percents = SplitPercents(r[3].as<std::string>());
  b.updated_by = r[4].as<std::string>();
  b.update_ms = r[5].as<int64_t>();
  return b;
}

}  // namespace

Result<std::unique_ptr<PgBudgets>> PgBudgets::Open(const std::string& uri) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgBudgets>(
      new PgBudgets(std::make_unique<PgConnection>(std::move(target), "budgets")));
}

PgBudgets::PgBudgets(std::unique_ptr<PgConnection> conn) : conn_(std::move(conn)) {}
PgBudgets::~PgBudgets() = default;

Status PgBudgets::Put(const billing::Budget& in) {
  billing::Budget b = in;
  GPUPOOL_RETURN_IF_ERROR(billing::NormalizeBudget(&b));
  MutexLock lock(&mu_);
  Result<bool> done = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    txn.exec_params(
        "INSERT INTO budgets (tenant, amount_nanos, currency, alert_percents, updated_by, "
        "update_ms) VALUES ($1, $2, $3, $4::integer[], $5, $6) ON CONFLICT (tenant) DO UPDATE SET "
        "amount_nanos = EXCLUDED.amount_nanos, currency = EXCLUDED.currency, alert_percents = "
        "EXCLUDED.alert_percents, updated_by = EXCLUDED.updated_by, update_ms = "
        "EXCLUDED.update_ms",
        b.tenant, b.amount.nanos(), b.currency, PercentsLiteral(b.alert_percents), b.updated_by,
        b.update_ms);
    return true;
  });
  return done.status();
}

Result<std::vector<billing::Budget>> PgBudgets::List(const std::string& tenant_prefix) {
  MutexLock lock(&mu_);
  return InTxn<std::vector<billing::Budget>>(*conn_, [&](pqxx::work& txn) {
    std::vector<billing::Budget> out;
    // The subtree of a path: itself and what starts with "<path>/" (no LIKE: '_' is literal in
    // tenant paths).
    for (const auto& r : txn.exec_params(std::string("SELECT ") + kColumns +
                                             " FROM budgets WHERE $1 = '' OR tenant = $1 OR "
                                             "left(tenant, length($1) + 1) = $1 || '/' "
                                             "ORDER BY tenant",
                                         tenant_prefix)) {
      out.push_back(Row(r));
    }
    return out;
  });
}

Status PgBudgets::Delete(const std::string& tenant) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params("DELETE FROM budgets WHERE tenant = $1 RETURNING tenant", tenant)
                .empty();
  });
  if (!found.ok()) return found.status();
  return *found ? Status::Ok() : Status::NotFound("tenant '" + tenant + "' has no budget");
}

}  // namespace gpupool
