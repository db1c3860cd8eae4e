#include "billing/price_plan.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace gpupool::billing {
namespace {

Status Invalid(const std::string& field, const std::string& why) {
  return Status::InvalidArgument(field + ": " + why);
}

bool Matches(const std::string& key, const std::string& value) {
  return key.empty() || key == value;
}

Status ValidateTenantPathText(std::string_view path, const std::string& field) {
  if (path.empty() || path.size() > 255) return Invalid(field, "must be a tenant path");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string_view seg = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty()) return Invalid(field, "'" + std::string(path) + "' has an empty segment");
    for (char c : seg) {
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
      if (!ok) {
        return Invalid(field,
                       "'" + std::string(path) + "' may hold only a-z, 0-9, '-', '_', '.' and '/'");
      }
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePlanName(std::string_view name, std::string_view field) {
  bool ok = !name.empty() && name.size() <= 63;
  for (size_t i = 0; ok && i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    ok = alnum || (i > 0 && (c == '.' || c == '_' || c == '-'));
  }
  if (!ok) {
    return Invalid(std::string(field), "'" + std::string(name) +
                                           "' must be 1 to 63 of a-z, 0-9, '.', '_', '-', "
                                           "starting with a letter or digit");
  }
  return Status::Ok();
}

Status ValidatePricePlan(const PricePlan& plan) {
  GPUPOOL_RETURN_IF_ERROR(ValidatePlanName(plan.name));
  GPUPOOL_RETURN_IF_ERROR(ValidateCurrency(plan.currency).WithContext("plan"));
  if (plan.description.size() > 1024) return Invalid("plan.description", "at most 1024 bytes");
  if (plan.preemption_credit_bps < 0 || plan.preemption_credit_bps > kFullCreditBps) {
    return Invalid("plan.preemption_credit",
                   "must be between 0 and 100 percent (0..10000 basis points)");
  }
  if (plan.effective_from_ms < 0) return Invalid("plan.effective_from", "must not be negative");
  std::set<std::string> tenants;
  for (const std::string& t : plan.tenants) {
    GPUPOOL_RETURN_IF_ERROR(ValidateTenantPathText(t, "plan.tenants"));
    if (!tenants.insert(t).second) return Invalid("plan.tenants", "'" + t + "' is listed twice");
  }
  if (plan.rates.empty()) return Invalid("plan.rates", "a plan needs at least one rate");
  std::set<std::tuple<std::string, std::string, std::string, Unit>> keys;
  for (size_t i = 0; i < plan.rates.size(); ++i) {
    const PriceRate& r = plan.rates[i];
    const std::string field = "plan.rates[" + std::to_string(i) + "]";
    if (r.price.negative()) return Invalid(field + ".price", "must not be negative");
    if (!r.mig_profile.empty() && r.unit != Unit::kMigProfileHour) {
      return Invalid(field + ".mig_profile", "only a mig-profile-hour rate names a MIG profile");
    }
    for (const std::string* s : {&r.pool, &r.model, &r.mig_profile}) {
      if (s->size() > 128) return Invalid(field, "pool, model and MIG profile: at most 128 bytes");
    }
    if (!keys.insert({r.pool, r.model, r.mig_profile, r.unit}).second) {
      return Invalid(field, "a second rate for pool '" + r.pool + "', model '" + r.model +
                                "', profile '" + r.mig_profile + "', unit " +
                                std::string(UnitName(r.unit)));
    }
  }
  for (const auto& [cls, m] : plan.priority_multipliers) {
    if (cls.empty() || cls.size() > 64) {
      return Invalid("plan.priority_multipliers", "a class name must be 1 to 64 bytes");
    }
    if (m.nanos() <= 0) {
      return Invalid("plan.priority_multipliers['" + cls + "']", "must be greater than 0");
    }
  }
  return Status::Ok();
}

int64_t EffectiveFrom(int64_t requested_ms, int64_t now_ms, bool first_version) {
  constexpr int64_t kHourMs = 3'600'000;
  const int64_t from = std::max(requested_ms, now_ms);
  return first_version ? from - from % kHourMs : from;
}

bool TenantWithinPath(std::string_view tenant, std::string_view root) {
  if (root.empty()) return true;
  if (!tenant.starts_with(root)) return false;
  return tenant.size() == root.size() || tenant[root.size()] == '/';
}

const PriceRate* FindRate(const PricePlan& plan, const UsageDimensions& dims, Unit unit) {
  const PriceRate* best = nullptr;
  auto rank = [](const PriceRate& r) {
    return std::tuple(!r.pool.empty(), !r.model.empty(), !r.mig_profile.empty());
  };
  for (const PriceRate& r : plan.rates) {
    if (r.unit != unit || !Matches(r.pool, dims.pool) || !Matches(r.model, dims.model) ||
        !Matches(r.mig_profile, dims.mig_profile)) {
      continue;
    }
    if (best == nullptr || rank(r) > rank(*best)) best = &r;
  }
  return best;
}

bool PricesUnit(const PricePlan& plan, Unit unit) {
  return std::any_of(plan.rates.begin(), plan.rates.end(),
                     [unit](const PriceRate& r) { return r.unit == unit; });
}

Decimal MultiplierFor(const PricePlan& plan, const std::string& priority_class) {
  auto it = plan.priority_multipliers.find(priority_class);
  return it == plan.priority_multipliers.end() ? Decimal::FromUnits(1) : it->second;
}

PlanBook::PlanBook(std::vector<PricePlan> versions) : versions_(std::move(versions)) {
  std::sort(versions_.begin(), versions_.end(), [](const PricePlan& a, const PricePlan& b) {
    return std::tie(a.name, a.version) < std::tie(b.name, b.version);
  });
}

const PricePlan* PlanBook::VersionAt(const std::string& name, int64_t at_ms) const {
  const PricePlan* found = nullptr;
  for (const PricePlan& p : versions_) {
    if (p.name == name && p.effective_from_ms <= at_ms &&
        (found == nullptr || p.version > found->version)) {
      found = &p;
    }
  }
  return found;
}

Result<const PricePlan*> PlanBook::Resolve(const std::string& tenant, int64_t at_ms) const {
  const PricePlan* best = nullptr;
  size_t best_depth = 0;
  const PricePlan* fallback = nullptr;
  for (size_t i = 0; i < versions_.size(); ++i) {
    if (i + 1 < versions_.size() && versions_[i + 1].name == versions_[i].name) continue;
    const PricePlan* p = VersionAt(versions_[i].name, at_ms);
    if (p == nullptr) continue;
    if (p->name == "default") fallback = p;
    for (const std::string& root : p->tenants) {
      if (TenantWithinPath(tenant, root) && (best == nullptr || root.size() > best_depth)) {
        best = p;
        best_depth = root.size();
      }
    }
  }
  if (best != nullptr) return best;
  if (fallback != nullptr) return fallback;
  return Status::FailedPrecondition("no price plan rates tenant '" + tenant +
                                    "' at that time: no plan lists it (or a tenant above it) "
                                    "and no plan named 'default' is in effect");
}

}  // namespace gpupool::billing
