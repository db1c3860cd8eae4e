#include "billing/export.h"

#include <cstdio>

#include "billing/period.h"

namespace gpupool::billing {
namespace {

std::string ItemCode(const InvoiceLine& l) {
  std::string code = "gpu." + std::string(UnitName(l.unit)) + "." + l.dims.pool + "." +
                     (l.dims.model.empty() ? "any" : l.dims.model);
  if (!l.dims.mig_profile.empty()) code += "." + l.dims.mig_profile;
  code += "." + (l.dims.priority_class.empty() ? "default" : l.dims.priority_class);
  return code;
}

std::string Row(std::initializer_list<std::string> cells) {
  std::string out;
  bool first = true;
  for (const std::string& c : cells) {
    if (!first) out += ',';
    out += c;
    first = false;
  }
  return out + "\r\n";
}

std::string Num(Decimal d) { return CsvCell(d.ToString(), false); }

}  // namespace

std::string Rfc3339(int64_t unix_ms) {
  int64_t secs = unix_ms / 1000;
  int64_t ms = unix_ms % 1000;
  if (ms < 0) {
    ms += 1000;
    --secs;
  }
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  int64_t y = 0, m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  char buf[128];
  if (ms == 0) {
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                  static_cast<long long>(y), static_cast<long long>(m), static_cast<long long>(d),
                  static_cast<long long>(sod / 3600), static_cast<long long>(sod / 60 % 60),
                  static_cast<long long>(sod % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ",
                  static_cast<long long>(y), static_cast<long long>(m), static_cast<long long>(d),
                  static_cast<long long>(sod / 3600), static_cast<long long>(sod / 60 % 60),
                  static_cast<long long>(sod % 60), static_cast<long long>(ms));
  }
  return buf;
}

std::string CsvCell(std::string_view value, bool text) {
  std::string v(value);
  if (text && !v.empty() &&
      (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == '\t' || v[0] == '\r')) {
    v.insert(0, "'");
  }
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<FeedItem> FeedItems(const Invoice& inv) {
  std::vector<FeedItem> out;
  auto add = [&](const InvoiceLine& l, bool credit) {
    FeedItem it;
    it.account = l.dims.tenant;
    it.item_code = ItemCode(l) + (credit ? ".credit" : "");
    it.description = std::string(credit ? "Preemption credit: " : "") +
                     std::string(UnitName(l.unit)) + " in pool " + l.dims.pool +
                     (l.dims.model.empty() ? "" : " on " + l.dims.model) +
                     (l.dims.mig_profile.empty() ? "" : " " + l.dims.mig_profile) +
                     (l.dims.priority_class.empty() ? "" : ", class " + l.dims.priority_class) +
                     (l.dims.service.empty() ? "" : ", service " + l.dims.service);
    it.quantity = l.quantity;
    it.unit = std::string(UnitName(l.unit));
    it.unit_price = l.unit_price;
    it.amount = credit ? Decimal::FromNanos(-l.amount.nanos()) : l.amount;
    it.currency = inv.currency;
    it.period_start_ms = inv.period_start_ms;
    it.period_end_ms = inv.period_end_ms;
    out.push_back(std::move(it));
  };
  for (const InvoiceLine& l : inv.lines) add(l, false);
  for (const InvoiceLine& l : inv.credits) add(l, true);
  return out;
}

std::string InvoicesCsv(std::span<const Invoice> invoices) {
  std::string out =
      Row({"invoice_tenant", "period_start",   "period_end",    "currency",     "kind",
           "tenant",         "pool",           "model",         "mig_profile",  "priority_class",
           "unit",           "quantity",       "base_quantity", "base_measure", "unit_price",
           "multiplier",     "credit_percent", "amount",        "plan",         "plan_version",
           "service"});
  for (const Invoice& inv : invoices) {
    const std::string head = CsvCell(inv.tenant) + "," + Rfc3339(inv.period_start_ms) + "," +
                             Rfc3339(inv.period_end_ms) + "," + CsvCell(inv.currency);
    const int minor = MinorDigits(inv.currency);
    auto line = [&](const InvoiceLine& l, std::string_view kind) {
      out +=
          Row({head, std::string(kind), CsvCell(l.dims.tenant), CsvCell(l.dims.pool),
               CsvCell(l.dims.model), CsvCell(l.dims.mig_profile), CsvCell(l.dims.priority_class),
               std::string(UnitName(l.unit)), Num(l.quantity), std::to_string(l.base_quantity),
               std::string(BaseMeasureName(l.unit)), Num(l.unit_price), Num(l.multiplier),
               l.credit_bps == 0 ? "" : Num(Decimal::FromNanos(l.credit_bps * 10'000'000LL)),
               l.amount.ToFixed(minor), CsvCell(l.plan), std::to_string(l.plan_version),
               CsvCell(l.dims.service)});
    };
    for (const InvoiceLine& l : inv.lines) line(l, "charge");
    for (const InvoiceLine& l : inv.credits) line(l, "credit");
    auto sum = [&](std::string_view kind, Decimal amount) {
      out += Row({head, std::string(kind), "", "", "", "", "", "", "", "", "", "", "", "",
                  amount.ToFixed(minor), "", "", ""});
    };
    sum("subtotal", inv.subtotal);
    sum("credits", inv.credit_total);
    sum("total", inv.total);
  }
  return out;
}

std::string FeedCsv(std::span<const FeedItem> items) {
  std::string out = Row({"account", "item_code", "description", "quantity", "unit", "unit_price",
                         "amount", "currency", "period_start", "period_end"});
  for (const FeedItem& it : items) {
    out +=
        Row({CsvCell(it.account), CsvCell(it.item_code), CsvCell(it.description), Num(it.quantity),
             it.unit, Num(it.unit_price), it.amount.ToFixed(MinorDigits(it.currency)),
             CsvCell(it.currency), Rfc3339(it.period_start_ms), Rfc3339(it.period_end_ms)});
  }
  return out;
}

}  // namespace gpupool::billing
