// Budgets (budget.h): validation, thresholds reached, and the alert subjects.
#include "billing/budget.h"

#include <algorithm>
#include <charconv>

namespace gpupool::billing {

Status NormalizeBudget(Budget* b) {
  if (b->tenant.empty()) return Status::InvalidArgument("budget.tenant: a tenant path is required");
  if (b->tenant.find('@') != std::string::npos) {
    return Status::InvalidArgument("budget.tenant: '" + b->tenant.substr(0, 100) +
                                   "' is not a tenant path");
  }
  if (b->amount.negative() || b->amount.zero()) {
    return Status::InvalidArgument("budget.amount: must be greater than 0, got " +
                                   b->amount.ToString());
  }
  if (Status s = ValidateCurrency(b->currency); !s.ok()) {
    return Status::InvalidArgument("budget.currency: " + s.message());
  }
  if (b->alert_percents.empty()) b->alert_percents = kDefaultAlertPercents;
  if (b->alert_percents.size() > kMaxAlertPercents) {
    return Status::InvalidArgument("budget.alert_percents: at most " +
                                   std::to_string(kMaxAlertPercents) + " thresholds, got " +
                                   std::to_string(b->alert_percents.size()));
  }
  std::sort(b->alert_percents.begin(), b->alert_percents.end());
  for (size_t i = 0; i < b->alert_percents.size(); ++i) {
    const int32_t p = b->alert_percents[i];
    if (p < 1 || p > kMaxAlertPercent) {
      return Status::InvalidArgument("budget.alert_percents: " + std::to_string(p) +
                                     " is outside 1.." + std::to_string(kMaxAlertPercent));
    }
    if (i > 0 && b->alert_percents[i - 1] == p) {
      return Status::InvalidArgument("budget.alert_percents: " + std::to_string(p) +
                                     " is listed twice");
    }
  }
  return Status::Ok();
}

std::vector<int32_t> ReachedAlerts(const Budget& b, Decimal spent) {
  std::vector<int32_t> out;
  for (int32_t p : b.alert_percents) {
    // spent >= amount × p / 100, in exact integers (128 bits: no overflow).
    if (static_cast<__int128>(spent.nanos()) * 100 >= static_cast<__int128>(b.amount.nanos()) * p) {
      out.push_back(p);
    }
  }
  return out;
}

std::string PercentUsed(Decimal spent, Decimal amount) {
  if (amount.nanos() <= 0) return "0.00";
  // The percent in nanos: spent × 100 × 1e9 / amount.
  Result<Decimal> pct =
      RoundHalfEven(static_cast<__int128>(spent.nanos()) * 100 * 1'000'000'000, amount.nanos(), 2);
  return pct.ok() ? pct->ToFixed(2) : ">" + std::to_string(kMaxAlertPercent * 1000);
}

std::string BudgetAlertPrefix(std::string_view tenant, std::string_view month) {
  return "budget/" + std::string(tenant) + "@" + std::string(month) + "/";
}

std::string BudgetAlertSubject(std::string_view tenant, std::string_view month, int32_t percent) {
  return BudgetAlertPrefix(tenant, month) + std::to_string(percent);
}

std::optional<BudgetAlertKey> ParseBudgetAlertSubject(std::string_view subject) {
  constexpr std::string_view kHead = "budget/";
  if (!subject.starts_with(kHead)) return std::nullopt;
  subject.remove_prefix(kHead.size());
  const size_t at = subject.rfind('@');
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const std::string_view rest = subject.substr(at + 1);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  BudgetAlertKey key;
  key.tenant = std::string(subject.substr(0, at));
  key.month = std::string(rest.substr(0, slash));
  const std::string_view pct = rest.substr(slash + 1);
  auto [end, ec] = std::from_chars(pct.data(), pct.data() + pct.size(), key.percent);
  if (ec != std::errc() || end != pct.data() + pct.size() || key.percent < 1) return std::nullopt;
  return key;
}

}  // namespace gpupool::billing
