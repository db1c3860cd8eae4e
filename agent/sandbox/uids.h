// UidMap: which unprivileged uid/gid a task runs as.
//
// Two sources, from the agent's `sandbox` config:
//  - tenant_users: a tenant (exact path, e.g. "acme/ml") → a user name that must exist in the
//    host's passwd (its uid and primary gid are used) or "#<uid>" for a bare numeric uid (gid =
//    uid). Every task of that tenant runs as that uid.
//  - uid_pool {first, count}: tenants not in the map get a uid of their own from the pool, one per
//    running task, handed back when the task ends; gid = uid. Two tasks never share a pool uid,
//    so they cannot signal, trace or read each other's files.
// MPS clients (`shared_by_tenant`): NVIDIA's MPS control daemon runs one server at a time for
// one uid and queues clients of another uid until that server's clients are gone
// (nvidia-cuda-mps-control(1)), so every task of a tenant that is a client of the tenant's MPS
// daemon must run as one uid: the tenant's shared pool uid, held while any such task runs.
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
  bool shared = false;  // the tenant's shared uid (AcquireShared), counted per holder
};

class UidMap {
 public:
  UidMap(std::map<std::string, std::string> tenant_users, int64_t pool_first, int64_t pool_count);

  Result<TaskIdentity> Acquire(const std::string& tenant);
  // The tenant's one uid for its MPS clients: its tenant_users mapping, or a pool uid shared by
  // every holder until the last gives it back.
  Result<TaskIdentity> AcquireShared(const std::string& tenant);
  void Release(const TaskIdentity& id);
  // The identity a task a previous agent process started runs as, for a restarted agent that
  // re-adopts it: a pool uid is marked in use again (FailedPrecondition when it already is, or
  // lies outside the pool); a tenant_users uid must still be the tenant's. Released as usual.
  // `shared`: the tenant's shared uid (an MPS client's): held once more, by every re-adopted
  // client of the tenant, and refused when the tenant's shared uid is now another.
  Result<TaskIdentity> Reserve(const std::string& tenant, uid_t uid, bool shared = false);
  int64_t pool_in_use() const;

 private:
  std::map<std::string, std::string> tenant_users_;
  int64_t pool_first_;
  int64_t pool_count_;
  mutable std::mutex mu_;
  std::set<uid_t> in_use_;  // guarded by mu_
  int64_t next_ = 0;        // guarded by mu_: rotates through the pool
  struct Shared {
    TaskIdentity id;
    int holders = 0;
  };
  std::map<std::string, Shared> shared_;  // guarded by mu_: tenant → its shared pool uid
};

}  // namespace gpupool::agent::sandbox
