// Internals of ServiceImpl shared by its two source files (service_impl.cc, service_logs.cc).
// Not part of any public API.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "api/service_impl.h"

namespace gpupool {
struct JobRecord;
}

namespace gpupool::api {

// PERMISSION_DENIED unless the caller is an admin.
Status RequireAdmin(const CallContext& ctx, std::string_view what);
// PERMISSION_DENIED unless the caller is an admin or `tenant` is its principal or below it.
Status RequireTenant(const CallContext& ctx, const std::string& tenant, std::string_view what);
Status RequireJobAccess(const CallContext& ctx, const JobRecord& job);

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
