#include "scheduler/tenancy.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace gpupool {
namespace {

constexpr int kDims = 3;

std::string UsageKey(const std::string& pool, std::string_view path) {
  std::string k = pool;
  k += '\n';
  k += path;
  return k;
}

// Every prefix of a path, longest first: "a/b/c" → "a/b/c", "a/b", "a".
std::vector<std::string_view> Prefixes(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    out.push_back(path);
    size_t slash = path.rfind('/');
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(0, slash);
  }
  return out;
}

bool IsUnder(std::string_view path, std::string_view ancestor) {
  return path.size() != ancestor.size() && TenantWithin(path, ancestor);
}

void Decay(TenantUsage& u, int64_t now_us, int64_t half_life_us) {
  double a = 0;
  if (half_life_us > 0 && now_us > u.decayed_at_us) {
    a = std::exp2(-static_cast<double>(now_us - u.decayed_at_us) /
                  static_cast<double>(half_life_us));
  } else if (half_life_us > 0) {
    a = 1;  // no time passed
  }
  for (int d = 0; d < kDims; ++d) {
    u.decayed[d] = u.decayed[d] * a + static_cast<double>(Dimension(u.used, d)) * (1 - a);
  }
  u.decayed_at_us = std::max(u.decayed_at_us, now_us);
}

}  // namespace

QuotaAmount OneDimension(int dim, int64_t value) {
  QuotaAmount a;
  if (dim == 0) a.resources.milli_tflops = value;
  if (dim == 1) a.resources.vram_mib = value;
  if (dim == 2) a.devices = static_cast<int32_t>(value);
  return a;
}

int64_t Dimension(const QuotaAmount& a, int dim) {
  switch (dim) {
    case 0:
      return a.resources.milli_tflops;
    case 1:
      return a.resources.vram_mib;
    default:
      return a.devices;
  }
}

std::string FormatDimension(const QuotaAmount& a, int dim) {
  switch (dim) {
    case 0:
      return FormatTflops(a.resources.milli_tflops) + " TFLOPS";
    case 1:
      return std::to_string(a.resources.vram_mib) + " MiB";
    default:
      return std::to_string(a.devices) + " device(s)";
  }
}

Status ValidateTenantPath(std::string_view path, std::string_view field) {
  auto invalid = [&](const std::string& what) {
    return Status::InvalidArgument(std::string(field) + ": " + what);
  };
  if (path.empty()) return invalid("must not be empty (a tenant path like org/project/user)");
  const std::string quoted = "'" + std::string(path) + "'";
  int depth = 0;
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    const std::string_view seg =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    const std::string label = "segment " + std::to_string(++depth);
    if (depth > kMaxTenantDepth) {
      return invalid(quoted + " has more than " + std::to_string(kMaxTenantDepth) +
                     " segments (org/project/user)");
    }
    if (seg.empty()) return invalid(quoted + ": " + label + " must not be empty");
    if (seg.size() > kMaxTenantSegmentLength) {
      return invalid(quoted + ": " + label + " must be at most " +
                     std::to_string(kMaxTenantSegmentLength) + " characters, got " +
                     std::to_string(seg.size()));
    }
    bool ok = (seg[0] >= 'a' && seg[0] <= 'z') || (seg[0] >= '0' && seg[0] <= '9');
    for (char c : seg) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.');
    }
    if (!ok) {
      return invalid(quoted + ": " + label + " '" + std::string(seg) +
                     "' must match [a-z0-9][a-z0-9-_.]*");
    }
    if (slash == std::string_view::npos) return Status::Ok();
    start = slash + 1;
  }
}

Status TenantBook::ValidatePath(std::string_view path) {
  return ValidateTenantPath(path, "tenant");
}

std::string TenantBook::ParentOf(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? "" : std::string(path.substr(0, slash));
}

Status TenantBook::CheckCreate(const TenantRecord& t) const {
  GPUPOOL_RETURN_IF_ERROR(ValidatePath(t.path));
  if (tenants_.contains(t.path)) {
    return Status::AlreadyExists("tenant '" + t.path + "' already exists");
  }
  std::string parent = ParentOf(t.path);
  if (!parent.empty() && !tenants_.contains(parent)) {
    return Status::FailedPrecondition("tenant '" + t.path + "': parent '" + parent +
                                      "' does not exist; create it first");
  }
  return Status::Ok();
}

Status TenantBook::CheckDelete(const std::string& path) const {
  if (!tenants_.contains(path)) return Status::NotFound("tenant '" + path + "' not found");
  auto next = tenants_.upper_bound(path);
  if (next != tenants_.end() && IsUnder(next->first, path)) {
    return Status::FailedPrecondition("tenant '" + path + "' still has child '" + next->first +
                                      "'; delete the children first");
  }
  return Status::Ok();
}

void TenantBook::PutTenant(TenantRecord t) {
  std::string path = t.path;
  tenants_[path] = std::move(t);
}

void TenantBook::EraseTenant(const std::string& path) {
  ++version_;
  tenants_.erase(path);
  for (auto it = quotas_.lower_bound({path, ""}); it != quotas_.end() && it->first.first == path;)
    it = quotas_.erase(it);
}

const QuotaRecord* TenantBook::Quota(const std::string& tenant, const std::string& pool) const {
  auto it = quotas_.find({tenant, pool});
  return it == quotas_.end() ? nullptr : &it->second;
}

const QuotaRecord* TenantBook::ParentQuota(const std::string& pool,
                                           const std::string& tenant) const {
  std::vector<std::string_view> prefixes = Prefixes(tenant);
  for (size_t i = 1; i < prefixes.size(); ++i) {
    if (const QuotaRecord* q = Quota(std::string(prefixes[i]), pool)) return q;
  }
  return nullptr;
}

std::vector<const QuotaRecord*> TenantBook::ChildQuotas(const std::string& pool,
                                                        const std::string& tenant) const {
  std::vector<const QuotaRecord*> out;
  for (const auto& [key, q] : quotas_) {
    if (key.second != pool || !IsUnder(key.first, tenant)) continue;
    const QuotaRecord* parent = ParentQuota(pool, key.first);
    // Nearest quota above it is `tenant` (or would be, when `tenant` has none yet).
    if (parent == nullptr || parent->tenant == tenant || !IsUnder(parent->tenant, tenant))
      out.push_back(&q);
  }
  return out;
}

// Each dimension not negative, and guaranteed within the limit where there is one.
Status TenantBook::CheckOwnAmounts(const QuotaRecord& q, const std::string& who) const {
  for (int d = 0; d < kDims; ++d) {
    if (Dimension(q.guaranteed, d) < 0 || Dimension(q.limit, d) < 0) {
      return Status::InvalidArgument(who + ": amounts must not be negative");
    }
    if (Dimension(q.limit, d) > 0 && Dimension(q.guaranteed, d) > Dimension(q.limit, d)) {
      return Status::InvalidArgument(who + ": guaranteed " + FormatDimension(q.guaranteed, d) +
                                     " exceeds limit " + FormatDimension(q.limit, d));
    }
  }
  return Status::Ok();
}

// Within the nearest quota above: its limit no higher, and the guarantees of the parent's
// children (this one included, as it would be) no more than the parent's own guarantee.
Status TenantBook::CheckAgainstParent(const QuotaRecord& q, const std::string& who) const {
  const QuotaRecord* parent = ParentQuota(q.pool, q.tenant);
  if (parent == nullptr) return Status::Ok();
  std::vector<const QuotaRecord*> siblings = ChildQuotas(q.pool, parent->tenant);
  for (int d = 0; d < kDims; ++d) {
    int64_t plim = Dimension(parent->limit, d);
    if (plim > 0 && Dimension(q.limit, d) > plim) {
      return Status::FailedPrecondition(who + ": limit " + FormatDimension(q.limit, d) +
                                        " exceeds the limit of parent " + parent->tenant + " (" +
                                        FormatDimension(parent->limit, d) + ")");
    }
    int64_t sum = Dimension(q.guaranteed, d);
    for (const QuotaRecord* s : siblings) {
      if (s->tenant != q.tenant && !IsUnder(s->tenant, q.tenant))
        sum += Dimension(s->guaranteed, d);
    }
    if (Dimension(q.guaranteed, d) > 0 && sum > Dimension(parent->guaranteed, d)) {
      QuotaAmount total = OneDimension(d, sum);
      return Status::FailedPrecondition(who + ": guarantees under " + parent->tenant +
                                        " would total " + FormatDimension(total, d) +
                                        ", more than its own guaranteed " +
                                        FormatDimension(parent->guaranteed, d));
    }
  }
  return Status::Ok();
}

// Above the nearest quotas below: its limit no lower than theirs, its guarantee at least their
// guarantees together.
Status TenantBook::CheckAgainstChildren(const QuotaRecord& q, const std::string& who) const {
  std::vector<const QuotaRecord*> children = ChildQuotas(q.pool, q.tenant);
  for (int d = 0; d < kDims; ++d) {
    int64_t sum = 0;
    for (const QuotaRecord* c : children) {
      sum += Dimension(c->guaranteed, d);
      if (Dimension(q.limit, d) > 0 && Dimension(c->limit, d) > Dimension(q.limit, d)) {
        return Status::FailedPrecondition(who + ": limit " + FormatDimension(q.limit, d) +
                                          " is below the limit of child " + c->tenant + " (" +
                                          FormatDimension(c->limit, d) + ")");
      }
    }
    if (sum > Dimension(q.guaranteed, d)) {
      return Status::FailedPrecondition(who + ": guaranteed " + FormatDimension(q.guaranteed, d) +
                                        " is below what its children are guaranteed together");
    }
  }
  return Status::Ok();
}

Status TenantBook::CheckQuota(const QuotaRecord& q) const {
  if (!tenants_.contains(q.tenant)) return Status::NotFound("tenant '" + q.tenant + "' not found");
  const std::string who = "quota of " + q.tenant + " in pool " + q.pool;
  GPUPOOL_RETURN_IF_ERROR(CheckOwnAmounts(q, who));
  GPUPOOL_RETURN_IF_ERROR(CheckAgainstParent(q, who));
  return CheckAgainstChildren(q, who);
}

void TenantBook::PutQuota(QuotaRecord q) {
  ++version_;
  std::pair key{q.tenant, q.pool};
  quotas_[key] = std::move(q);
}

void TenantBook::EraseQuota(const std::string& tenant, const std::string& pool) {
  ++version_;
  quotas_.erase({tenant, pool});
}

std::vector<const QuotaRecord*> TenantBook::Chain(const std::string& pool,
                                                  const std::string& tenant) const {
  std::vector<const QuotaRecord*> out;
  if (quotas_.empty()) return out;
  for (std::string_view p : Prefixes(tenant)) {
    if (const QuotaRecord* q = Quota(std::string(p), pool)) out.push_back(q);
  }
  return out;
}

std::string TenantBook::GroupOf(const std::string& pool, const std::string& tenant) const {
  if (!quotas_.empty()) {
    for (std::string_view p : Prefixes(tenant)) {
      if (Quota(std::string(p), pool) != nullptr) return std::string(p);
    }
  }
  return tenant;
}

void TenantBook::Charge(const std::string& pool, const std::string& tenant,
                        const QuotaAmount& amount, int sign, int64_t now_us) {
  ++version_;
  for (std::string_view p : Prefixes(tenant)) {
    auto [it, fresh] = usage_.try_emplace(UsageKey(pool, p));
    TenantUsage& u = it->second;
    if (fresh) u.decayed_at_us = now_us;
    Decay(u, now_us, half_life_us_);
    if (sign > 0) {
      u.used += amount;
    } else {
      u.used -= amount;
    }
  }
}

const TenantUsage* TenantBook::FindUsage(const std::string& pool, const std::string& path) const {
  auto it = usage_.find(UsageKey(pool, path));
  return it == usage_.end() ? nullptr : &it->second;
}

QuotaAmount TenantBook::Used(const std::string& pool, const std::string& path) const {
  const TenantUsage* u = FindUsage(pool, path);
  return u == nullptr ? QuotaAmount{} : u->used;
}

void TenantBook::Hold(const std::string& pool, const std::string& tenant, const QuotaAmount& amount,
                      int sign) {
  ++version_;
  for (std::string_view p : Prefixes(tenant)) {
    TenantUsage& u = usage_[UsageKey(pool, p)];
    if (sign > 0) {
      u.held += amount;
    } else {
      u.held -= amount;
    }
  }
}

QuotaAmount TenantBook::Held(const std::string& pool, const std::string& path) const {
  const TenantUsage* u = FindUsage(pool, path);
  return u == nullptr ? QuotaAmount{} : u->held;
}

double TenantBook::Share(const std::string& pool, const std::string& group,
                         const QuotaAmount& implicit, int64_t now_us) const {
  const TenantUsage* found = FindUsage(pool, group);
  if (found == nullptr) return 0;
  TenantUsage u = *found;
  Decay(u, now_us, half_life_us_);
  const QuotaRecord* q = Quota(group, pool);
  QuotaAmount weight = q != nullptr && !q->guaranteed.IsZero() ? q->guaranteed : implicit;
  double share = 0;
  for (int d = 0; d < kDims; ++d) {
    int64_t w = Dimension(weight, d);
    if (w <= 0) continue;
    double effective = (u.decayed[d] + static_cast<double>(Dimension(u.used, d))) / 2;
    share = std::max(share, effective / static_cast<double>(w));
  }
  return share;
}

Status TenantBook::CheckNeverFits(const std::string& pool, const std::string& tenant,
                                  const QuotaAmount& need) const {
  for (const QuotaRecord* q : Chain(pool, tenant)) {
    if (int d = need.FirstOver(q->limit); d >= 0) {
      return Status::FailedPrecondition("quota of " + q->tenant + " in pool " + pool + ": limit " +
                                        FormatDimension(q->limit, d) + ", job needs " +
                                        FormatDimension(need, d));
    }
  }
  return Status::Ok();
}

std::string TenantBook::WhyOverLimit(const std::string& pool, const std::string& tenant,
                                     const QuotaAmount& need, std::string* binding) const {
  return WhyOverLimitFreeing(pool, tenant, need, {}, binding);
}

std::string TenantBook::WhyOverLimitFreeing(
    const std::string& pool, const std::string& tenant, const QuotaAmount& need,
    const std::vector<std::pair<std::string, QuotaAmount>>& freed, std::string* binding) const {
  static constexpr const char* kDimNames[] = {"tflops", "vram", "devices"};
  for (const QuotaRecord* q : Chain(pool, tenant)) {
    QuotaAmount used = Used(pool, q->tenant) + Held(pool, q->tenant);
    for (const auto& [who, amount] : freed)
      if (TenantWithin(who, q->tenant)) used -= amount;
    if (int d = (used + need).FirstOver(q->limit); d >= 0) {
      std::string lim_text = FormatDimension(q->limit, d);
      std::string used_text = FormatDimension(used, d);
      // "180 TFLOPS" and "200 TFLOPS" → "180/200 TFLOPS".
      std::string number = used_text.substr(0, used_text.find(' '));
      if (binding != nullptr) *binding = q->tenant + " in pool " + pool + ": " + kDimNames[d];
      return "quota " + q->tenant + " at " + number + "/" + lim_text + " in pool " + pool +
             " (task needs " + FormatDimension(need, d) + ")";
    }
  }
  return "";
}

bool TenantBook::WithinGuarantee(const std::string& pool, const std::string& tenant,
                                 const QuotaAmount& need) const {
  std::string group = GroupOf(pool, tenant);
  const QuotaRecord* q = Quota(group, pool);
  if (q == nullptr || q->guaranteed.IsZero()) return false;
  return (Used(pool, group) + Held(pool, group) + need).Fits(q->guaranteed);
}

}  // namespace gpupool
