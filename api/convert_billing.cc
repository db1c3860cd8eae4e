#include "api/convert_billing.h"

#include "api/convert.h"

namespace gpupool::api {
namespace {

int64_t Ms(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

Status Text(const std::string& value, const std::string& field, size_t max = 128) {
  if (value.size() > max) return Invalid(field, "at most " + std::to_string(max) + " bytes");
  // UTF-8 is checked where the text is stored (store/validate.h), for every writer alike.
  if (value.find('\0') != std::string::npos) return Invalid(field, "must not contain NUL");
  return Status::Ok();
}

void SetMs(int64_t ms, google::protobuf::Timestamp* out) { SetTimestamp(ms * 1000, out); }

void LineProto(const billing::InvoiceLine& l, int minor, v1::InvoiceLine* out) {
  out->set_tenant(l.dims.tenant);
  out->set_pool(l.dims.pool);
  out->set_model(l.dims.model);
  out->set_mig_profile(l.dims.mig_profile);
  out->set_priority_class(l.dims.priority_class);
  out->set_service(l.dims.service);
  out->set_unit(std::string(billing::UnitName(l.unit)));
  out->set_quantity(l.quantity.ToString());
  out->set_base_quantity(l.base_quantity);
  out->set_base_measure(std::string(billing::BaseMeasureName(l.unit)));
  out->set_unit_price(l.unit_price.ToString());
  out->set_multiplier(l.multiplier.ToString());
  if (l.credit_bps != 0) {
    out->set_credit_percent(billing::Decimal::FromNanos(l.credit_bps * 10'000'000LL).ToString());
  }
  out->set_amount(l.amount.ToFixed(minor));
  out->set_plan(l.plan);
  out->set_plan_version(l.plan_version);
}

}  // namespace

Result<billing::PricePlan> PricePlanFromProto(const v1::PricePlan& in, int64_t now_ms) {
  billing::PricePlan p;
  p.name = in.name();
  p.currency = in.currency();
  GPUPOOL_RETURN_IF_ERROR(Text(in.description(), "plan.description", 1024));
  p.description = in.description();
  p.effective_from_ms = now_ms;
  if (in.has_effective_time()) {
    p.effective_from_ms = Ms(in.effective_time());
    if (p.effective_from_ms < now_ms) {
      return Invalid("plan.effective_time",
                     "must not be in the past: a new version may not change what was already "
                     "billed (leave it unset for now)");
    }
  }
  for (const std::string& t : in.tenants()) {
    GPUPOOL_RETURN_IF_ERROR(Text(t, "plan.tenants", 255));
    p.tenants.push_back(t);
  }
  for (int i = 0; i < in.rates_size(); ++i) {
    const v1::PriceRate& r = in.rates(i);
    const std::string field = "plan.rates[" + std::to_string(i) + "]";
    billing::PriceRate out;
    for (auto [value, name] : {std::pair{&r.pool(), ".pool"}, std::pair{&r.model(), ".model"},
                               std::pair{&r.mig_profile(), ".mig_profile"}}) {
      GPUPOOL_RETURN_IF_ERROR(Text(*value, field + name));
    }
    out.pool = r.pool();
    out.model = r.model();
    out.mig_profile = r.mig_profile();
    std::optional<billing::Unit> unit = billing::ParseUnit(r.unit());
    if (!unit) {
      return Invalid(field + ".unit", "'" + r.unit() +
                                          "' is not one of tflops-hour, vram-gib-hour, "
                                          "device-hour, mig-profile-hour, spill-gib-hour, "
                                          "slot-hour");
    }
    out.unit = *unit;
    GPUPOOL_ASSIGN_OR_RETURN(out.price, billing::Decimal::Parse(r.price(), field + ".price"));
    p.rates.push_back(std::move(out));
  }
  for (const auto& [cls, text] : in.priority_multipliers()) {
    const std::string field = "plan.priority_multipliers['" + cls + "']";
    GPUPOOL_RETURN_IF_ERROR(Text(cls, "plan.priority_multipliers", 64));
    GPUPOOL_ASSIGN_OR_RETURN(p.priority_multipliers[cls], billing::Decimal::Parse(text, field));
  }
  if (!in.preemption_credit_percent().empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(
        billing::Decimal pct,
        billing::Decimal::Parse(in.preemption_credit_percent(), "plan.preemption_credit_percent"));
    if (pct.negative() || pct > billing::Decimal::FromUnits(100) || pct.nanos() % 10'000'000 != 0) {
      return Invalid("plan.preemption_credit_percent",
                     "must be a percent from 0 to 100 with at most 2 decimals");
    }
    p.preemption_credit_bps = static_cast<int32_t>(pct.nanos() / 10'000'000);
  }
  GPUPOOL_RETURN_IF_ERROR(billing::ValidatePricePlan(p));
  return p;
}

void ToProto(const billing::PricePlan& p, v1::PricePlan* out) {
  out->set_name(p.name);
  out->set_version(p.version);
  SetMs(p.effective_from_ms, out->mutable_effective_time());
  out->set_currency(p.currency);
  out->set_description(p.description);
  for (const std::string& t : p.tenants) out->add_tenants(t);
  for (const billing::PriceRate& r : p.rates) {
    v1::PriceRate* o = out->add_rates();
    o->set_pool(r.pool);
    o->set_model(r.model);
    o->set_mig_profile(r.mig_profile);
    o->set_unit(std::string(billing::UnitName(r.unit)));
    o->set_price(r.price.ToString());
  }
  for (const auto& [cls, m] : p.priority_multipliers) {
    (*out->mutable_priority_multipliers())[cls] = m.ToString();
  }
  out->set_preemption_credit_percent(
      billing::Decimal::FromNanos(p.preemption_credit_bps * 10'000'000LL).ToString());
  out->set_created_by(p.created_by);
  SetMs(p.create_ms, out->mutable_create_time());
}

void ToProto(const billing::Invoice& inv, v1::Invoice* out) {
  const int minor = billing::MinorDigits(inv.currency);
  out->set_tenant(inv.tenant);
  SetMs(inv.period_start_ms, out->mutable_period_start());
  SetMs(inv.period_end_ms, out->mutable_period_end());
  out->set_currency(inv.currency);
  for (const billing::InvoiceLine& l : inv.lines) LineProto(l, minor, out->add_lines());
  for (const billing::InvoiceLine& l : inv.credits) LineProto(l, minor, out->add_credits());
  out->set_subtotal(inv.subtotal.ToFixed(minor));
  out->set_credit_total(inv.credit_total.ToFixed(minor));
  out->set_total(inv.total.ToFixed(minor));
}

void ToProto(const billing::FeedItem& it, v1::UsageFeedItem* out) {
  out->set_account(it.account);
  out->set_item_code(it.item_code);
  out->set_description(it.description);
  out->set_quantity(it.quantity.ToString());
  out->set_unit(it.unit);
  out->set_unit_price(it.unit_price.ToString());
  out->set_amount(it.amount.ToFixed(billing::MinorDigits(it.currency)));
  out->set_currency(it.currency);
  SetMs(it.period_start_ms, out->mutable_period_start());
  SetMs(it.period_end_ms, out->mutable_period_end());
}

Result<billing::Period> PeriodFromRequest(const std::string& period,
                                          const google::protobuf::Timestamp* start,
                                          const google::protobuf::Timestamp* end, int64_t now_ms) {
  if (!period.empty()) {
    if (start != nullptr || end != nullptr) {
      return Invalid("period", "give either a period or start and end times, not both");
    }
    return billing::ParsePeriod(period);
  }
  if ((start == nullptr) != (end == nullptr)) {
    return Invalid(start == nullptr ? "start_time" : "end_time",
                   "required with the other one (or give a period such as 2026-11)");
  }
  if (start == nullptr) return billing::MonthOf(now_ms);
  billing::Period p{Ms(*start), Ms(*end)};
  if (p.start_ms >= p.end_ms) return Invalid("end_time", "must be after start_time");
  if (p.end_ms - p.start_ms > 366LL * 86'400'000) {
    return Invalid("end_time", "a billing period is at most 366 days");
  }
  return p;
}

}  // namespace gpupool::api
