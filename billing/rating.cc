#include "billing/rating.h"

#include <map>
#include <tuple>

namespace gpupool::billing {
namespace {

// The grouping key of a line: sorts lines in the documented order.
using LineKey = std::tuple<std::string, std::string, std::string, std::string, std::string,
                           std::string, Unit, std::string, int64_t>;

LineKey KeyOf(const MeteredQuantity& q, const PricePlan& plan) {
  return {q.dims.tenant,         q.dims.service, q.dims.pool, q.dims.model, q.dims.mig_profile,
          q.dims.priority_class, q.unit,         plan.name,   plan.version};
}

struct Group {
  const PricePlan* plan = nullptr;
  const PriceRate* rate = nullptr;
  UsageDimensions dims;
  Unit unit = Unit::kTflopsHour;
  int64_t total = 0;
  int64_t preempted = 0;
};

Status Overflow() {
  return Status(StatusCode::kOutOfRange,
                "invoice amount overflow: a quantity or price is too large");
}

// round(base × price × multiplier × bps / 10000 / base_per_hour), in the currency's minor unit.
Result<Decimal> Price(int64_t base, const Group& g, int32_t bps, int minor_digits) {
  const Decimal mult = MultiplierFor(*g.plan, g.dims.priority_class);
  __int128 num = 0;
  // base × price_nanos × mult_nanos × bps is in nanos × 1e9 × 1e4; divide those back out.
  if (__builtin_mul_overflow(static_cast<__int128>(base),
                             static_cast<__int128>(g.rate->price.nanos()), &num) ||
      __builtin_mul_overflow(num, static_cast<__int128>(mult.nanos()), &num) ||
      __builtin_mul_overflow(num, static_cast<__int128>(bps), &num)) {
    return Overflow();
  }
  const __int128 den =
      static_cast<__int128>(BasePerUnitHour(g.unit)) * kNanosPerUnit * kFullCreditBps;
  return RoundHalfEven(num, den, minor_digits);
}

InvoiceLine LineOf(const Group& g, int64_t base) {
  InvoiceLine l;
  l.dims = g.dims;
  l.unit = g.unit;
  l.plan = g.plan->name;
  l.plan_version = g.plan->version;
  l.base_quantity = base;
  l.quantity = UnitHours(g.unit, base);
  l.unit_price = g.rate->price;
  l.multiplier = MultiplierFor(*g.plan, g.dims.priority_class);
  return l;
}

}  // namespace

Decimal UnitHours(Unit unit, int64_t base_quantity) {
  Result<Decimal> d =
      RoundHalfEven(static_cast<__int128>(base_quantity) * kNanosPerUnit, BasePerUnitHour(unit), 9);
  return d.ok() ? *d : Decimal();
}

Result<Invoice> RateInvoice(const std::string& tenant, int64_t start_ms, int64_t end_ms,
                            std::span<const MeteredQuantity> usage, const PlanBook& plans) {
  if (start_ms >= end_ms) {
    return Status::InvalidArgument("invoice period: start must be before end");
  }
  Invoice inv;
  inv.tenant = tenant;
  inv.period_start_ms = start_ms;
  inv.period_end_ms = end_ms;

  std::map<LineKey, Group> groups;
  for (const MeteredQuantity& q : usage) {
    if (!TenantWithinPath(q.dims.tenant, tenant) || q.start_ms < start_ms || q.start_ms >= end_ms) {
      continue;
    }
    if (q.quantity < 0) {
      return Status::InvalidArgument("usage of tenant '" + q.dims.tenant + "' in pool '" +
                                     q.dims.pool + "': negative quantity");
    }
    GPUPOOL_ASSIGN_OR_RETURN(const PricePlan* plan, plans.Resolve(q.dims.tenant, q.start_ms));
    if (!PricesUnit(*plan, q.unit)) continue;  // the plan does not bill this unit
    if (inv.currency.empty()) {
      inv.currency = plan->currency;
    } else if (inv.currency != plan->currency) {
      return Status::InvalidArgument("invoice for '" + tenant + "' would mix currencies " +
                                     inv.currency + " and " + plan->currency + " (plan '" +
                                     plan->name + "'); bill a subtree per currency");
    }
    const PriceRate* rate = FindRate(*plan, q.dims, q.unit);
    if (rate == nullptr) {
      return Status::FailedPrecondition(
          "price plan '" + plan->name + "' v" + std::to_string(plan->version) + " prices " +
          std::string(UnitName(q.unit)) + " but has no rate for pool '" + q.dims.pool +
          "', model '" + q.dims.model + "'" +
          (q.dims.mig_profile.empty() ? "" : ", profile '" + q.dims.mig_profile + "'") +
          "; add one, or a rate with an empty pool/model that matches any");
    }
    Group& g = groups[KeyOf(q, *plan)];
    g.plan = plan;
    g.rate = rate;
    g.dims = q.dims;
    g.unit = q.unit;
    if (__builtin_add_overflow(g.total, q.quantity, &g.total)) return Overflow();
    if (q.ended_by_preemption && __builtin_add_overflow(g.preempted, q.quantity, &g.preempted)) {
      return Overflow();
    }
  }
  if (inv.currency.empty()) {
    Result<const PricePlan*> p = plans.Resolve(tenant, start_ms);
    inv.currency = p.ok() ? (*p)->currency : "XXX";
  }
  const int minor = MinorDigits(inv.currency);

  for (const auto& [key, g] : groups) {
    InvoiceLine line = LineOf(g, g.total);
    GPUPOOL_ASSIGN_OR_RETURN(line.amount, Price(g.total, g, kFullCreditBps, minor));
    GPUPOOL_ASSIGN_OR_RETURN(inv.subtotal, Add(inv.subtotal, line.amount));
    inv.lines.push_back(std::move(line));
    if (g.preempted > 0 && g.plan->preemption_credit_bps > 0) {
      InvoiceLine credit = LineOf(g, g.preempted);
      credit.credit_bps = g.plan->preemption_credit_bps;
      GPUPOOL_ASSIGN_OR_RETURN(credit.amount, Price(g.preempted, g, credit.credit_bps, minor));
      GPUPOOL_ASSIGN_OR_RETURN(inv.credit_total, Add(inv.credit_total, credit.amount));
      inv.credits.push_back(std::move(credit));
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(inv.total, Sub(inv.subtotal, inv.credit_total));
  return inv;
}

}  // namespace gpupool::billing
