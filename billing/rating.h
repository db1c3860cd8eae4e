// Rating: metered quantities and price plans in, an invoice out. Pure: no I/O, no clock.
//
// RateInvoice(tenant, [start, end), usage, plans):
//  1. Keeps the quantities of `tenant`'s subtree whose period starts in [start, end).
//  2. Picks each quantity's plan version: PlanBook::Resolve(quantity's tenant, its start).
//  3. Groups the quantities by (plan, version, dimensions, unit) — one charge line per group —
//     and, for those ended by preemption, one credit line per group. The service is one of the
//     dimensions: each service's replicas get lines of their own (rated at the same rates as
//     jobs: a plan's rates do not name services).
//  4. Prices each line exactly, then rounds once (billing/money.h, half-even to the currency's
//     minor unit):
//        amount = round(Σquantity × price × multiplier / base_per_unit_hour)
//        credit = round(Σpreempted × price × multiplier × credit_bps / 10000 / base_per_unit_hour)
//     (every factor an exact integer or nanos; the product is formed in 128 bits).
//  5. subtotal = Σ charge amounts, credits = Σ credit amounts, total = subtotal − credits.
//
// Lines are ordered by (tenant, service, pool, model, MIG profile, priority class, unit, plan
// version): a tenant's jobs first (service ""), then each service's lines together.
// Every plan that rates the invoice must use one currency (else INVALID_ARGUMENT naming both);
// an invoice with no usage has no lines, zero totals and the currency of the plan that would
// rate the tenant at `start` (or "XXX", ISO 4217's "no currency", when none would).
//
// Errors: INVALID_ARGUMENT for start >= end, a negative quantity or mixed currencies;
// FAILED_PRECONDITION when no plan rates a tenant, or a plan prices a unit but has no rate that
// matches a quantity (the message names its pool, model and unit); OUT_OF_RANGE on overflow.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "billing/money.h"
#include "billing/price_plan.h"
#include "billing/usage.h"

namespace gpupool::billing {

struct InvoiceLine {
  UsageDimensions dims;
  Unit unit = Unit::kTflopsHour;
  std::string plan;
  int64_t plan_version = 0;
  int64_t base_quantity = 0;  // Σ of the quantities, in the unit's base measure
  Decimal quantity;           // base_quantity in unit-hours, rounded half-even to 1e-9 (display)
  Decimal unit_price;         // per unit-hour
  Decimal multiplier;         // the priority class's
  int32_t credit_bps = 0;     // credit lines: the share credited; charge lines: 0
  Decimal amount;             // rounded to the currency's minor unit; >= 0
};

struct Invoice {
  std::string tenant;  // the subtree root billed
  int64_t period_start_ms = 0;
  int64_t period_end_ms = 0;
  std::string currency;
  std::vector<InvoiceLine> lines;    // charges
  std::vector<InvoiceLine> credits;  // credits for preempted work (amounts are positive)
  Decimal subtotal;                  // Σ lines[].amount
  Decimal credit_total;              // Σ credits[].amount
  Decimal total;                     // subtotal − credit_total
};

Result<Invoice> RateInvoice(const std::string& tenant, int64_t start_ms, int64_t end_ms,
                            std::span<const MeteredQuantity> usage, const PlanBook& plans);

// Base quantity in unit-hours, rounded half-even to 1e-9 (for display and exports).
Decimal UnitHours(Unit unit, int64_t base_quantity);

}  // namespace gpupool::billing
