// TenantBook: the tenant tree, the quotas attached to it and the usage that rolls up through it,
// as plain data the core owns. No I/O, no clock (times are passed in), no threads.
//
// Model (docs/tenancy.md):
//  * Tenants form a tree by path: "acme" ⊃ "acme/research" ⊃ "acme/research/alice". A tenant's
//    parent must be registered before it; a tenant with children cannot be deleted.
//  * A quota is per (tenant, pool), in three dimensions: milli-TFLOPS, VRAM MiB and devices
//    (exclusive grants). `guaranteed` 0 means nothing guaranteed; `limit` 0 means unlimited.
//  * Quotas are opt-in. A job's tenant path need not be registered: the quotas that bind it are
//    those of every registered prefix of its path that has a quota in the job's pool (its chain).
//    The nearest one is its share group: the unit of fair share, guarantees and borrowing.
//  * Usage is charged to every prefix of the job's tenant path, so it rolls up the tree: a task
//    fits "now" when, for every quota of its chain, used + need ≤ limit. A child never exceeds
//    its parent: the parent's quota binds the child's jobs too, and SetQuota refuses a child
//    limit above the parent's or children's guarantees summing above the parent's.
//  * A preemptor's reservation holds its quota from the moment its victims are chosen (Hold):
//    limits and guarantees count used + held, so no other task of the chain can take the quota
//    the room was made for before the preemptor takes the room (docs/tenancy.md). Fair share
//    and the usage views count `used` alone.
//  * Fair share: a group's share is its dominant ratio of usage to guarantee, over the
//    dimensions it has a guarantee in. Usage is the mean of current usage and an exponentially
//    decayed average of it (half-life from TenancyOptions), so a tenant that used much recently
//    yields to one that did not, and current placements count at once within a pass.
//
// Thread safety: none; the core's thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"

namespace gpupool {

// The one tenant-path rule, for the API edge, the config file and the core alike: 1 to 3
// segments (org/project/user) joined by '/', each [a-z0-9][a-z0-9-_.]* and at most 63
// characters. INVALID_ARGUMENT naming `field`, e.g.
// "spec.tenant: 'acme/Research': segment 2 'Research' must match [a-z0-9][a-z0-9-_.]*".
inline constexpr int kMaxTenantDepth = 3;
inline constexpr size_t kMaxTenantSegmentLength = 63;
Status ValidateTenantPath(std::string_view path, std::string_view field);

// Usage of one tenant (its whole subtree) in one pool.
struct TenantUsage {
  QuotaAmount used;               // held now by SCHEDULED and RUNNING tasks
  QuotaAmount held;               // promised to preemptors whose victims still stop (Hold)
  double decayed[3] = {0, 0, 0};  // decayed average of used: milli-TFLOPS, MiB, devices
  int64_t decayed_at_us = 0;
};

// "400 TFLOPS", "81920 MiB", "2 device(s)": the dimension `dim` (0, 1, 2) of an amount.
std::string FormatDimension(const QuotaAmount& a, int dim);
int64_t Dimension(const QuotaAmount& a, int dim);
QuotaAmount OneDimension(int dim, int64_t value);

class TenantBook {
 public:
  explicit TenantBook(int64_t half_life_ms = 0) : half_life_us_(half_life_ms * 1000) {}

  // ValidateTenantPath(path, "tenant").
  static Status ValidatePath(std::string_view path);
  static std::string ParentOf(std::string_view path);  // "" for an org

  // Registry.
  Status CheckCreate(const TenantRecord& t) const;    // valid path, new, parent exists
  Status CheckDelete(const std::string& path) const;  // exists, has no children
  void PutTenant(TenantRecord t);
  void EraseTenant(const std::string& path);  // and its quotas
  bool HasTenant(const std::string& path) const { return tenants_.contains(path); }
  const std::map<std::string, TenantRecord>& tenants() const { return tenants_; }

  // Quotas. CheckQuota: the tenant is registered, guaranteed ≤ limit, and the tree stays
  // consistent with the nearest quota above and the quotas right below.
  Status CheckQuota(const QuotaRecord& q) const;
  void PutQuota(QuotaRecord q);
  void EraseQuota(const std::string& tenant, const std::string& pool);
  const QuotaRecord* Quota(const std::string& tenant, const std::string& pool) const;
  const std::map<std::pair<std::string, std::string>, QuotaRecord>& quotas() const {
    return quotas_;
  }

  // The quotas binding a job of `tenant` in `pool`, nearest first.
  std::vector<const QuotaRecord*> Chain(const std::string& pool, const std::string& tenant) const;
  // The share group: the nearest tenant with a quota in `pool`, or `tenant` itself when none.
  std::string GroupOf(const std::string& pool, const std::string& tenant) const;

  // Usage. Charge adds (sign +1) or removes (sign -1) `amount` on every prefix of `tenant`.
  void Charge(const std::string& pool, const std::string& tenant, const QuotaAmount& amount,
              int sign, int64_t now_us);
  QuotaAmount Used(const std::string& pool, const std::string& path) const;
  // Hold adds (sign +1) or removes (sign -1) a reservation's `amount` on every prefix of `tenant`:
  // counted by WhyOverLimit and WithinGuarantee, not by Used or Share.
  void Hold(const std::string& pool, const std::string& tenant, const QuotaAmount& amount,
            int sign);
  QuotaAmount Held(const std::string& pool, const std::string& path) const;
  // Changes on every Charge and quota change: shares computed at an equal version and time are
  // still valid.
  uint64_t version() const { return version_; }
  // The group's fair-share key at `now_us` (lower goes first). A group without a guarantee is
  // weighed against `implicit`, a small default share of the pool.
  double Share(const std::string& pool, const std::string& group, const QuotaAmount& implicit,
               int64_t now_us) const;

  // Admission: FAILED_PRECONDITION naming the first quota of the chain whose limit `need` exceeds
  // on its own ("quota of acme/research in pool gpu: limit 200 TFLOPS, job needs 400 TFLOPS").
  Status CheckNeverFits(const std::string& pool, const std::string& tenant,
                        const QuotaAmount& need) const;
  // "" when `need` fits every limit of the chain now; else why not
  // ("quota acme/research at 180/200 TFLOPS in pool gpu").
  // `binding`, when given, is set to the binding quota and dimension ("acme in pool gpu: vram").
  std::string WhyOverLimit(const std::string& pool, const std::string& tenant,
                           const QuotaAmount& need, std::string* binding = nullptr) const;
  // The same once the tasks in `freed` (tenant path, amount) are gone: a preemptor's verdict on
  // the quota it will hold when its victims (some perhaps of its own chain) have stopped.
  std::string WhyOverLimitFreeing(const std::string& pool, const std::string& tenant,
                                  const QuotaAmount& need,
                                  const std::vector<std::pair<std::string, QuotaAmount>>& freed,
                                  std::string* binding = nullptr) const;
  // True when the group has a guarantee and used + need stays within it (reclaim may help).
  bool WithinGuarantee(const std::string& pool, const std::string& tenant,
                       const QuotaAmount& need) const;

 private:
  // CheckQuota's three rules.
  Status CheckOwnAmounts(const QuotaRecord& q, const std::string& who) const;
  Status CheckAgainstParent(const QuotaRecord& q, const std::string& who) const;
  Status CheckAgainstChildren(const QuotaRecord& q, const std::string& who) const;
  const TenantUsage* FindUsage(const std::string& pool, const std::string& path) const;
  // The nearest quota strictly above `tenant` in `pool`.
  const QuotaRecord* ParentQuota(const std::string& pool, const std::string& tenant) const;
  // Quotas whose nearest quota above is `tenant` (in `pool`).
  std::vector<const QuotaRecord*> ChildQuotas(const std::string& pool,
                                              const std::string& tenant) const;

  int64_t half_life_us_;
  uint64_t version_ = 0;
  std::map<std::string, TenantRecord> tenants_;
  std::map<std::pair<std::string, std::string>, QuotaRecord> quotas_;  // (tenant, pool)
  std::unordered_map<std::string, TenantUsage> usage_;                 // pool '\n' path
};

}  // namespace gpupool
