// Internals of ServiceImpl shared by its source files (service_impl.cc, service_logs.cc,
// service_tenants.cc).
// Not part of any public API.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "api/convert.h"
#include "api/service_impl.h"
#include "scheduler/scheduler.h"

namespace gpupool {
struct JobRecord;
}

namespace gpupool::api {

// The wall clock in milliseconds since the epoch (records' create and expiry times).
inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Answers `done` with an error and an empty reply.
template <typename T>
void Fail(const Reply<T>& done, Status s) {
  done(std::move(s), T{});
}

// Core callback → proto reply (ToProto of the domain value).
template <typename Domain, typename Proto>
SchedulerCallback<Domain> ReplyWith(Reply<Proto> done) {
  return [done = std::move(done)](Result<Domain> r) {
    if (!r.ok()) return Fail(done, r.status());
    Proto out;
    ToProto(*r, &out);
    done(Status::Ok(), std::move(out));
  };
}

// PERMISSION_DENIED unless the caller is an admin.
Status RequireAdmin(const CallContext& ctx, std::string_view what);
// PERMISSION_DENIED unless the caller is an admin or `tenant` is its principal or below it.
Status RequireTenant(const CallContext& ctx, const std::string& tenant, std::string_view what);
// The tenant prefix a list call reads: `prefix` checked as a tenant path (errors name `field`);
// for a caller below admin, its own scope when empty, and PERMISSION_DENIED above its scope.
Result<std::string> ListPrefix(const CallContext& ctx, std::string prefix, std::string_view field);
Status RequireJobAccess(const CallContext& ctx, const JobRecord& job);
// RequireJobAccess, and for a member (below tenant-admin) that it submitted the job itself.
Status RequireCancelAccess(const CallContext& ctx, const JobRecord& job);
// Whether the caller may use `pool`: admins any, tenants public ones and private ones that allow
// them or a tenant above them.
bool PoolVisible(const CallContext& ctx, const PoolRecord& pool);
// PERMISSION_DENIED unless the caller's role is at least `role` (api/caller.h).
Status RequireRole(const CallContext& ctx, Role role, std::string_view what);
// For changes to the tenant tree and its quotas: an admin, or a tenant-admin when `tenant` lies
// strictly below its scope (its own node and quota are its parent's to set).
Status RequireTenantAdminBelow(const CallContext& ctx, const std::string& tenant,
                               std::string_view what);

// One thread that runs delayed closures (log polling, fetch timeouts).
struct ServiceImpl::Timers {
  Timers();
  ~Timers();  // drops what has not run yet
  // Runs `fn` on the timer thread after `delay`; the returned function cancels it.
  std::function<void()> After(std::chrono::milliseconds delay, std::function<void()> fn);

 private:
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_ =
      boost::asio::make_work_guard(io_);
  std::thread thread_;
};

}  // namespace gpupool::api
