// PgStore's price plans: the price_plans table and its three child tables (migration 80).
// Versions are only ever inserted. Adding one reads the name's versions and inserts the next in
// one transaction on the audit connection (apart from the scheduling writer: plans are not
// fenced); two writers racing for the same version collide on the primary key, and the loser
// gets ABORTED.
#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_retry.h"
#include "store/pg_store.h"
#include "store/validate.h"

namespace gpupool {
namespace {

std::string Q(const std::string& text) {
  std::string out;
  AppendQuoted(&out, text);
  return out;
}

std::string Key(const billing::PricePlan& p) {
  return Q(p.name) + ", " + std::to_string(p.version);
}

std::string InsertSql(const billing::PricePlan& p) {
  std::string sql =
      "INSERT INTO price_plans (name, version, effective_from_ms, currency, description, "
      "preemption_credit_bps, created_by, create_ms) VALUES (" +
      Key(p) + ", " + std::to_string(p.effective_from_ms) + ", " + Q(p.currency) + ", " +
      Q(p.description) + ", " + std::to_string(p.preemption_credit_bps) + ", " + Q(p.created_by) +
      ", " + std::to_string(p.create_ms) + ");\n";
  for (const std::string& t : p.tenants) {
    sql += "INSERT INTO price_plan_tenants (name, version, tenant) VALUES (" + Key(p) + ", " +
           Q(t) + ");\n";
  }
  for (size_t i = 0; i < p.rates.size(); ++i) {
    const billing::PriceRate& r = p.rates[i];
    sql +=
        "INSERT INTO price_plan_rates (name, version, ordinal, pool, model, mig_profile, unit, "
        "price_nanos) VALUES (" +
        Key(p) + ", " + std::to_string(i) + ", " + Q(r.pool) + ", " + Q(r.model) + ", " +
        Q(r.mig_profile) + ", " + Q(std::string(billing::UnitName(r.unit))) + ", " +
        std::to_string(r.price.nanos()) + ");\n";
  }
  for (const auto& [cls, m] : p.priority_multipliers) {
    sql +=
        "INSERT INTO price_plan_multipliers (name, version, priority_class, multiplier_nanos) "
        "VALUES (" +
        Key(p) + ", " + Q(cls) + ", " + std::to_string(m.nanos()) + ");\n";
  }
  return sql;
}

std::string Where(const std::string& name) {
  return name.empty() ? std::string() : " WHERE name = " + Q(name);
}

// Every version of `name` ("" = all), children included, by name then version.
Result<std::vector<billing::PricePlan>> ReadPlans(pqxx::transaction_base& txn,
                                                  const std::string& name) {
  std::vector<billing::PricePlan> out;
  std::map<std::pair<std::string, int64_t>, size_t> index;
  for (const auto& row : txn.exec("SELECT name, version, effective_from_ms, currency, description, "
                                  "preemption_credit_bps, created_by, create_ms FROM price_plans" +
                                  Where(name) + " ORDER BY name, version")) {
    billing::PricePlan p;
    p.name = row[0].as<std::string>();
    p.version = row[1].as<int64_t>();
    p.effective_from_ms = row[2].as<int64_t>();
    p.currency = row[3].as<std::string>();
    p.description = row[4].as<std::string>();
    p.preemption_credit_bps = row[5].as<int32_t>();
    p.created_by = row[6].as<std::string>();
    p.create_ms = row[7].as<int64_t>();
    index[{p.name, p.version}] = out.size();
    out.push_back(std::move(p));
  }
  auto plan_of = [&](const pqxx::row& row) -> billing::PricePlan* {
    auto it = index.find({row[0].as<std::string>(), row[1].as<int64_t>()});
    return it == index.end() ? nullptr : &out[it->second];
  };
  for (const auto& row : txn.exec("SELECT name, version, tenant FROM price_plan_tenants" +
                                  Where(name) + " ORDER BY name, version, tenant")) {
    if (billing::PricePlan* p = plan_of(row)) p->tenants.push_back(row[2].as<std::string>());
  }
  for (const auto& row :
       txn.exec("SELECT name, version, pool, model, mig_profile, unit, price_nanos FROM "
                "price_plan_rates" +
                Where(name) + " ORDER BY name, version, ordinal")) {
    billing::PricePlan* p = plan_of(row);
    if (p == nullptr) continue;
    const std::string unit = row[5].as<std::string>();
    std::optional<billing::Unit> u = billing::ParseUnit(unit);
    if (!u) {
      return Status::Internal("price plan '" + p->name + "' v" + std::to_string(p->version) +
                              ": unknown unit '" + unit + "' in the database");
    }
    p->rates.push_back({row[2].as<std::string>(), row[3].as<std::string>(),
                        row[4].as<std::string>(), *u,
                        billing::Decimal::FromNanos(row[6].as<int64_t>())});
  }
  for (const auto& row : txn.exec("SELECT name, version, priority_class, multiplier_nanos FROM "
                                  "price_plan_multipliers" +
                                  Where(name))) {
    if (billing::PricePlan* p = plan_of(row)) {
      p->priority_multipliers[row[2].as<std::string>()] =
          billing::Decimal::FromNanos(row[3].as<int64_t>());
    }
  }
  return out;
}

}  // namespace

Result<billing::PricePlan> PgStore::AddPricePlan(billing::PricePlan plan, bool create) {
  GPUPOOL_RETURN_IF_ERROR(ValidatePricePlanRecord(plan));
  std::lock_guard lock(audit_mu_);
  Result<billing::PricePlan> out = RunWithRetry(
      *audit_conn_, *target_, [&](pqxx::connection& conn) -> Result<billing::PricePlan> {
        pqxx::work txn(conn);
        GPUPOOL_ASSIGN_OR_RETURN(std::vector<billing::PricePlan> versions,
                                 ReadPlans(txn, plan.name));
        std::vector<const billing::PricePlan*> existing;
        for (const billing::PricePlan& p : versions) existing.push_back(&p);
        GPUPOOL_ASSIGN_OR_RETURN(plan.version, NextPricePlanVersion(existing, plan, create));
        txn.exec(InsertSql(plan));
        txn.commit();
        return plan;
      });
  if (!out.ok() && out.status().code() == StatusCode::kAlreadyExists && !create) {
    return Status::Aborted("price plan '" + plan.name +
                           "': another version was added at the same moment; retry");
  }
  return out;
}

Result<std::vector<billing::PricePlan>> PgStore::ListPricePlans(const std::string& name) {
  std::lock_guard lock(read_mu_);
  return RunWithRetry(*read_conn_, *target_,
                      [&](pqxx::connection& conn) -> Result<std::vector<billing::PricePlan>> {
                        pqxx::read_transaction txn(conn);
                        return ReadPlans(txn, name);
                      });
}

}  // namespace gpupool
