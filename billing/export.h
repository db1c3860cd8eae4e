// Exports: invoices as CSV, and the usage feed for billing engines (WHMCS-style per-account usage
// items) as values and CSV. JSON goes through the API's protobuf mapping, not through here.
//
// Invoice CSV (RFC 4180, CRLF line ends, one header row): one row per charge line
// (kind=charge) and per credit line (kind=credit), then per invoice one row each of
// kind=subtotal, credits and total carrying only the invoice columns and the amount. Amounts
// are plain decimals with the currency's minor digits; credits are positive in their rows and
// subtracted in `total`. Times are RFC 3339 UTC. The last column, `service`, names the service
// whose replicas used a line's quantity (empty for jobs).
//
// Usage feed: one item per invoice line, keyed for a billing engine that bills an account per
// product code:
//   account      the tenant path the usage belongs to (the line's tenant, not the subtree root)
//   item_code    "gpu.<unit>.<pool>.<model>[.<mig profile>].<priority class>", plus ".credit"
//                for a preemption credit — stable across periods, so an engine maps it once;
//                a service's lines keep the code (a service is no product) and name the
//                service in their description ("…, service chat")
//   quantity     unit-hours (1e-9 precision), unit the unit's name ("tflops-hour")
//   amount       the line's amount; negative for a credit
//   period       [start, end) of the invoice
//
// Text cells that a spreadsheet would run as a formula (starting with '=', '+', '-', '@', tab or
// CR) are prefixed with a single quote.
//
// Thread safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "billing/rating.h"

namespace gpupool::billing {

struct FeedItem {
  std::string account;
  std::string item_code;
  std::string description;
  Decimal quantity;
  std::string unit;
  Decimal unit_price;
  Decimal amount;
  std::string currency;
  int64_t period_start_ms = 0;
  int64_t period_end_ms = 0;
};

std::vector<FeedItem> FeedItems(const Invoice& invoice);

std::string InvoicesCsv(std::span<const Invoice> invoices);
std::string FeedCsv(std::span<const FeedItem> items);

// "2026-11-01T00:00:00Z" (milliseconds shown only when not zero).
std::string Rfc3339(int64_t unix_ms);
// One CSV cell: quoted when it holds ',', '"', CR or LF; formula-guarded when `text`.
std::string CsvCell(std::string_view value, bool text = true);

}  // namespace gpupool::billing
