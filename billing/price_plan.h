// Price plans: what a unit of GPU usage costs, per pool, per GPU model or SKU, per billing unit,
// with priority-class multipliers and a credit for work lost to preemption (docs/billing.md).
//
// A plan has a name and numbered versions. Each version states the time it takes effect
// (effective_from_ms); usage metered in a period that starts at t is rated by the version of the
// plan in effect at t — the highest version whose effective_from_ms <= t. A new version only ever
// takes effect from its creation time on (the API refuses a back-dated one), so an invoice for a
// past period reads the same after any plan change — except that a plan's first version starts
// with its hour (EffectiveFrom, below).
//
// Which plan rates a tenant: among the plan versions in effect at t, the one whose `tenants`
// list holds the deepest ancestor-or-self of the tenant's path; failing that, the plan named
// "default". No such plan is FAILED_PRECONDITION when rating.
//
// Which rate prices a quantity (FindRate): among the plan's rates for the quantity's unit, those
// whose pool, model and MIG profile are each empty (any) or equal to the quantity's; the most
// specific wins, specificity ordered pool first, then model, then MIG profile (a pool-specific
// rate beats a model-specific one). Two rates with the same three keys and unit are invalid.
// A unit the plan has no rate for at all is not billed; a unit that has rates, none of which
// matches, is FAILED_PRECONDITION (a price list with a hole in it).
//
// Preemption credit: usage of task attempts that ended because the scheduler preempted them is
// charged like any other (the invoice shows what ran) and then credited at
// preemption_credit_bps / 10000 of that usage's charge, in a credit line of its own. 10000 (the
// default) credits all of it; 0 credits nothing. Failed, lost and cancelled attempts are not
// credited.
//
// Thread safety: values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "billing/money.h"
#include "billing/usage.h"

namespace gpupool::billing {

struct PriceRate {
  std::string pool;         // empty = any pool
  std::string model;        // GPU model or SKU name; empty = any
  std::string mig_profile;  // empty = any (meaningful for kMigProfileHour only)
  Unit unit = Unit::kTflopsHour;
  Decimal price;  // per unit-hour, in the plan's currency; >= 0
  friend bool operator==(const PriceRate&, const PriceRate&) = default;
};

inline constexpr int32_t kFullCreditBps = 10000;

struct PricePlan {
  std::string name;     // [a-z0-9][a-z0-9._-]{0,62}
  int64_t version = 0;  // 1, 2, ... per name; assigned by the store
  int64_t effective_from_ms = 0;
  std::string currency;  // ISO 4217, e.g. "USD"
  std::string description;
  std::vector<std::string> tenants;  // subtrees this plan applies to
  std::vector<PriceRate> rates;
  std::map<std::string, Decimal> priority_multipliers;  // class -> multiplier (> 0); absent = 1
  int32_t preemption_credit_bps = kFullCreditBps;       // 0..10000
  std::string created_by;                               // who made this version (audit identity)
  int64_t create_ms = 0;
  friend bool operator==(const PricePlan&, const PricePlan&) = default;
};

// INVALID_ARGUMENT naming the field: bad name or currency, negative price, multiplier <= 0,
// credit outside 0..10000, duplicate rate keys, an empty or malformed tenant path, a MIG
// profile on a rate whose unit is not mig-profile-hour.
Status ValidatePricePlan(const PricePlan& plan);
// Plan names: [a-z0-9][a-z0-9._-]{0,62}.
Status ValidatePlanName(std::string_view name, std::string_view field = "plan.name");

// When a new version stored at `now_ms` takes effect, given the time asked for (`requested_ms`:
// 0, or any time up to now, means at once). The one rule for every path that stores a version
// (the API's CreatePricePlan/UpdatePricePlan, the configured plans at start and on reload):
//  * a later version takes effect at max(requested, now): it never reaches back into what its
//    predecessor already priced;
//  * a plan's first version (`first_version`) takes effect at the start of that hour. Usage is
//    rated per hour by the version in effect at the hour's start, so a first version effective
//    mid-hour would leave that hour with no price at all, and its invoices would be refused
//    (FAILED_PRECONDITION). Before the first version the plan priced nothing, so reaching back to
//    the hour's start changes no charge the plan made.
int64_t EffectiveFrom(int64_t requested_ms, int64_t now_ms, bool first_version);

// Is `tenant` the subtree root `root` or below it (on path segments: "acme/r" is not within
// "acme/re")?
bool TenantWithinPath(std::string_view tenant, std::string_view root);

// The rate that prices `dims` in `unit` (see above), or null when none matches.
const PriceRate* FindRate(const PricePlan& plan, const UsageDimensions& dims, Unit unit);
// Does the plan price `unit` at all?
bool PricesUnit(const PricePlan& plan, Unit unit);
// The multiplier for a priority class: the plan's, else 1.
Decimal MultiplierFor(const PricePlan& plan, const std::string& priority_class);

// Every stored version of every plan; answers which version rates whom and when.
class PlanBook {
 public:
  PlanBook() = default;
  explicit PlanBook(std::vector<PricePlan> versions);

  // The version of plan `name` in effect at `at_ms`, or null.
  const PricePlan* VersionAt(const std::string& name, int64_t at_ms) const;
  // The plan version that rates `tenant`'s usage at `at_ms` (see above).
  Result<const PricePlan*> Resolve(const std::string& tenant, int64_t at_ms) const;

  const std::vector<PricePlan>& versions() const { return versions_; }

 private:
  std::vector<PricePlan> versions_;  // by name, then version
};

}  // namespace gpupool::billing
