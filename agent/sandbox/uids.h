// UidMap: which unprivileged uid/gid a task runs as.
//
// Two sources, from the agent's `sandbox` config:
//  - tenant_users: a tenant (exact path, e.g. "acme/ml") → a user name that must exist in the
//    host's passwd (its uid and primary gid are used) or "#<uid>" for a bare numeric uid (gid =
//    uid). Every task of that tenant runs as that uid.
//  - uid_pool {first, count}: tenants not in the map get a uid of their own from the pool, one per
//    running task, handed back when the task ends; gid = uid. Two tasks never share a pool uid,
//    so they cannot signal, trace or read each other's files.
// uid 0 is never handed out. A tenant without a mapping and no free pool uid is an error that
// names the tenant (the task fails; it never runs as root).
//
// Thread safety: all methods are safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "base/status.h"

namespace gpupool::agent::sandbox {

struct TaskIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  bool from_pool = false;
};

class UidMap {
 public:
  UidMap(std::map<std::string, std::string> tenant_users, int64_t pool_first, int64_t pool_count);

  Result<TaskIdentity> Acquire(const std::string& tenant);
  void Release(const TaskIdentity& id);
  int64_t pool_in_use() const;

 private:
  std::map<std::string, std::string> tenant_users_;
  int64_t pool_first_;
  int64_t pool_count_;
  mutable std::mutex mu_;
  std::set<uid_t> in_use_;  // guarded by mu_
  int64_t next_ = 0;        // guarded by mu_: rotates through the pool
};

}  // namespace gpupool::agent::sandbox
