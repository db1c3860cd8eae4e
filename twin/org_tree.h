// OrgTree: the tenants a twin replay maps a trace's pods to, their quotas in the replayed pool,
// and the priority class each trace QoS becomes. Parsed once from YAML (gpupool-twin
// --org-tree FILE; docs/twin.md has the format) or taken from DefaultOrgTree().
//
//  * Tenants are paths (ValidateTenantPath: 1 to 3 segments); a parent is listed before its
//    children. A quota is given in percent of the pool's GPUs (guaranteed_pct, limit_pct; 0 or
//    absent: none) and converted by the twin into milli-TFLOPS of the pool's normalized GPUs.
//  * Pods go to leaves (tenants without children), weighted by `weight` (default 1): a pod's
//    leaf is PickTenant(pod name), a fixed hash, so a replay is the same on every run.
//  * qos_classes maps a trace QoS (LS, BE, Burstable, Guaranteed) to a priority class name;
//    a QoS not listed gets `default_class`.
//
// Thread safety: plain values and functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool::twin {

struct OrgTenant {
  std::string path;
  int64_t guaranteed_pct_milli = 0;  // thousandths of a percent of the pool's GPUs; 0: none
  int64_t limit_pct_milli = 0;       // 0: no limit
  int64_t weight = 1;                // leaves only: share of the pods hashed here
  bool HasQuota() const { return guaranteed_pct_milli > 0 || limit_pct_milli > 0; }
};

struct OrgTree {
  std::vector<OrgTenant> tenants;  // parents before children
  std::map<std::string, std::string> qos_classes;
  std::string default_class = "normal";

  // The leaves, in listing order.
  std::vector<const OrgTenant*> Leaves() const;
  // The leaf a pod named `name` belongs to (FNV-1a of the name, weighted by the leaves).
  const std::string& PickTenant(std::string_view name) const;
  std::string ClassOf(const std::string& qos) const;
  // The tenant with a quota nearest above (or at) `path`, or "" when none: its share group.
  std::string GroupOf(const std::string& path) const;
  const OrgTenant* Find(const std::string& path) const;
};

// Four organisations with two teams each; guarantees 30/22/15/8 % of the pool (75 % in all),
// limits 100/90/80/60 %; LS and Guaranteed → high, Burstable → normal, BE → low.
OrgTree DefaultOrgTree();

// INVALID_ARGUMENT "FILE:LINE: key: message" for anything malformed: unknown keys, a bad path,
// a child before its parent, percents outside 0..100, a guarantee above its limit, children's
// guarantees above their parent's, no leaf with a positive weight.
Result<OrgTree> ParseOrgTree(std::string_view yaml, const std::string& source);
Result<OrgTree> LoadOrgTree(const std::string& path);

}  // namespace gpupool::twin
