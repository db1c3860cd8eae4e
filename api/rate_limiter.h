// RateLimiter: per-tenant submission rate limits at the edge, so one tenant's flood of SubmitJob
// calls cannot crowd out the others' or fill the database.
//
// A token bucket per organisation — the first segment of the job's tenant path, so a tenant
// cannot escape its limit by submitting under ever new child paths: it refills `rate_per_second`
// tokens a second up to `burst`, and each submission takes one. An empty bucket answers
// RESOURCE_EXHAUSTED (HTTP 429) with the wait before the next token, e.g.
//   "tenant 'acme': more than 50 submissions per second (burst 100); retry in 0.02 s"
// Admins are not limited (the caller decides; ServiceImpl passes only non-admin calls).
//
// Buckets are kept in memory (a restart refills them) and capped in number: past `max_buckets`
// organisations the fullest buckets are forgotten, which can only favour the caller.
//
// Thread safety: Admit() may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/mutex.h"
#include "base/status.h"

namespace gpupool::api {

struct RateLimit {
  double rate_per_second = 0;  // 0 = unlimited
  double burst = 0;            // bucket size; at least 1 when limited
};

class RateLimiter {
 public:
  // `now_us`: a monotonic clock in microseconds; empty = std::chrono::steady_clock.
  explicit RateLimiter(RateLimit limit, std::function<int64_t()> now_us = {},
                       size_t max_buckets = 100'000);

  // OK and one token taken, or RESOURCE_EXHAUSTED with the retry advice.
  Status Admit(const std::string& tenant_path);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_us = 0;
  };

  const RateLimit limit_;
  const std::function<int64_t()> now_us_;
  const size_t max_buckets_;
  Mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_ GPUPOOL_GUARDED_BY(mu_);  // by organisation
};

}  // namespace gpupool::api
