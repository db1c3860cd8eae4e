#include "api/rate_limiter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace gpupool::api {
namespace {

int64_t SteadyNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

RateLimiter::RateLimiter(RateLimit limit, std::function<int64_t()> now_us, size_t max_buckets)
    : limit_{limit.rate_per_second, std::max(limit.burst, 1.0)},
      now_us_(now_us ? std::move(now_us) : SteadyNowUs),
      max_buckets_(std::max<size_t>(max_buckets, 1)) {}

Status RateLimiter::Admit(const std::string& tenant_path) {
  if (limit_.rate_per_second <= 0) return Status::Ok();
  const std::string org = tenant_path.substr(0, tenant_path.find('/'));
  const int64_t now = now_us_();
  MutexLock lock(&mu_);
  auto it = buckets_.find(org);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_buckets_) {
      // Forget every bucket that has refilled: a fresh one is full too, so nobody loses.
      std::erase_if(buckets_, [&](const auto& kv) {
        const double refilled =
            kv.second.tokens + (now - kv.second.at_us) / 1e6 * limit_.rate_per_second;
        return refilled >= limit_.burst;
      });
    }
    it = buckets_.emplace(org, Bucket{limit_.burst, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min(limit_.burst, b.tokens + (now - b.at_us) / 1e6 * limit_.rate_per_second);
  b.at_us = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return Status::Ok();
  }
  const double wait_s = (1 - b.tokens) / limit_.rate_per_second;
  return Status::ResourceExhausted("tenant '" + org + "': more than " +
                                   Number(limit_.rate_per_second) +
                                   " submissions per second (burst " + Number(limit_.burst) +
                                   "); retry in " + Number(std::ceil(wait_s * 100) / 100) + " s");
}

}  // namespace gpupool::api
