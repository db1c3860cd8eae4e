#include "agent/sandbox/uids.h"

#include <pwd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace gpupool::agent::sandbox {

UidMap::UidMap(std::map<std::string, std::string> tenant_users, int64_t pool_first,
               int64_t pool_count)
    : tenant_users_(std::move(tenant_users)), pool_first_(pool_first), pool_count_(pool_count) {}

Result<TaskIdentity> UidMap::Acquire(const std::string& tenant) {
  auto it = tenant_users_.find(tenant);
  if (it != tenant_users_.end()) {
    const std::string& user = it->second;
    TaskIdentity id;
    if (!user.empty() && user[0] == '#') {
      char* end = nullptr;
      const long v = std::strtol(user.c_str() + 1, &end, 10);
      if (end == user.c_str() + 1 || *end != '\0' || v <= 0) {
        return Status::FailedPrecondition("sandbox: tenant '" + tenant + "' maps to '" + user +
                                          "', which is not a uid > 0");
      }
      id.uid = static_cast<uid_t>(v);
      id.gid = static_cast<gid_t>(v);
      return id;
    }
    // getpwnam_r: the agent may look users up from several threads.
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    const int rc = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
      return Status::FailedPrecondition("sandbox: user '" + user + "' for tenant '" + tenant +
                                        "' does not exist" +
                                        (rc ? std::string(" (") + std::strerror(rc) + ")" : ""));
    }
    if (pw.pw_uid == 0) {
      return Status::FailedPrecondition("sandbox: user '" + user + "' for tenant '" + tenant +
                                        "' is root; tasks never run as uid 0");
    }
    id.uid = pw.pw_uid;
    id.gid = pw.pw_gid;
    return id;
  }
  if (pool_count_ <= 0) {
    return Status::FailedPrecondition("sandbox: no uid for tenant '" + tenant +
                                      "' (not in sandbox.tenant_users and no sandbox.uid_pool)");
  }
  std::lock_guard lock(mu_);
  for (int64_t i = 0; i < pool_count_; ++i) {
    const uid_t uid = static_cast<uid_t>(pool_first_ + (next_ + i) % pool_count_);
    if (uid == 0 || in_use_.count(uid)) continue;
    in_use_.insert(uid);
    next_ = (next_ + i + 1) % pool_count_;  // rotate: a freed uid is reused last
    return TaskIdentity{uid, static_cast<gid_t>(uid), true};
  }
  return Status::ResourceExhausted("sandbox: uid pool exhausted (" + std::to_string(pool_count_) +
                                   " uids from " + std::to_string(pool_first_) +
                                   ", all in use) for tenant '" + tenant + "'");
}

Result<TaskIdentity> UidMap::AcquireShared(const std::string& tenant) {
  if (tenant_users_.count(tenant) != 0) return Acquire(tenant);  // one uid per tenant already
  {
    std::lock_guard lock(mu_);
    auto it = shared_.find(tenant);
    if (it != shared_.end()) {
      ++it->second.holders;
      return it->second.id;
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(TaskIdentity id, Acquire(tenant));
  id.shared = true;
  std::lock_guard lock(mu_);
  auto [it, inserted] = shared_.try_emplace(tenant, Shared{id, 0});
  if (!inserted) in_use_.erase(id.uid);  // another thread's came first: use that one
  ++it->second.holders;
  return it->second.id;
}

void UidMap::Release(const TaskIdentity& id) {
  if (!id.from_pool) return;
  std::lock_guard lock(mu_);
  if (id.shared) {
    for (auto it = shared_.begin(); it != shared_.end(); ++it) {
      if (it->second.id.uid != id.uid) continue;
      if (--it->second.holders > 0) return;
      shared_.erase(it);
      break;
    }
  }
  in_use_.erase(id.uid);
}

Result<TaskIdentity> UidMap::Reserve(const std::string& tenant, uid_t uid, bool shared) {
  if (tenant_users_.count(tenant) != 0) {
    GPUPOOL_ASSIGN_OR_RETURN(TaskIdentity id, shared ? AcquireShared(tenant) : Acquire(tenant));
    if (id.uid != uid) {
      return Status::FailedPrecondition("sandbox: tenant '" + tenant + "' now maps to uid " +
                                        std::to_string(id.uid) + ", not " + std::to_string(uid));
    }
    return id;
  }
  if (uid == 0 || static_cast<int64_t>(uid) < pool_first_ ||
      static_cast<int64_t>(uid) >= pool_first_ + pool_count_) {
    return Status::FailedPrecondition("sandbox: uid " + std::to_string(uid) +
                                      " is not in the uid pool");
  }
  std::lock_guard lock(mu_);
  if (shared) {
    auto it = shared_.find(tenant);
    if (it != shared_.end()) {
      if (it->second.id.uid != uid) {
        return Status::FailedPrecondition("sandbox: tenant '" + tenant + "' shares uid " +
                                          std::to_string(it->second.id.uid) + " now, not " +
                                          std::to_string(uid));
      }
      ++it->second.holders;
      return it->second.id;
    }
  }
  if (!in_use_.insert(uid).second) {
    return Status::FailedPrecondition("sandbox: uid " + std::to_string(uid) + " is in use");
  }
  TaskIdentity id{uid, static_cast<gid_t>(uid), true, shared};
  if (shared) shared_[tenant] = {id, 1};
  return id;
}

int64_t UidMap::pool_in_use() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(in_use_.size());
}

}  // namespace gpupool::agent::sandbox
