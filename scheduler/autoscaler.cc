#include "scheduler/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpupool {
namespace {

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

int64_t CeilCount(double v) { return static_cast<int64_t>(std::ceil(v - 1e-9)); }

}  // namespace

Status AutoscalerOptions::Check() const {
  if (min_replicas < 0) return Status::InvalidArgument("min_replicas must be ≥ 0");
  if (max_replicas < 1) return Status::InvalidArgument("max_replicas must be ≥ 1");
  if (min_replicas > max_replicas) {
    return Status::InvalidArgument("min_replicas " + std::to_string(min_replicas) +
                                   " is above max_replicas " + std::to_string(max_replicas));
  }
  if (!(target_in_flight > 0)) return Status::InvalidArgument("target_in_flight must be > 0");
  if (burst_window_ms <= 0) return Status::InvalidArgument("burst_window_ms must be > 0");
  if (stable_window_ms < burst_window_ms) {
    return Status::InvalidArgument("stable_window_ms must be ≥ burst_window_ms");
  }
  if (idle_to_zero_ms < 0) return Status::InvalidArgument("idle_to_zero_ms must be ≥ 0");
  if (drain_ms <= 0) return Status::InvalidArgument("drain_ms must be > 0");
  if (!(tolerance >= 0)) return Status::InvalidArgument("tolerance must be ≥ 0");
  if (!(down_headroom >= 0)) return Status::InvalidArgument("down_headroom must be ≥ 0");
  return Status::Ok();
}

Autoscaler::Autoscaler(AutoscalerOptions options) : options_(options) {}

void Autoscaler::Observe(int64_t now_ms, const ServiceLoadSample& s) {
  if (s.service_s > 0) service_s_ = s.service_s;
  const double in_flight = std::max(0.0, s.in_flight);
  queued_ = std::max(0.0, s.queued);
  // Little's law where the service time is known; until then what is in flight is the load.
  const double offered = service_s_ > 0 ? std::max(0.0, s.arrivals_per_s) * service_s_ : in_flight;
  burst_.push_back({now_ms, offered});
  while (!burst_.empty() && burst_.front().at_ms <= now_ms - options_.burst_window_ms) {
    burst_.pop_front();
  }
  if (in_flight + queued_ + std::max(0.0, s.arrivals_per_s) > 0) last_request_ms_ = now_ms;
}

double Autoscaler::BurstLoad(int64_t now_ms) const {
  double sum = 0;
  int n = 0;
  for (const Point& p : burst_) {
    if (p.at_ms > now_ms - options_.burst_window_ms) {
      sum += p.load;
      ++n;
    }
  }
  return n == 0 ? 0 : sum / n;
}

int32_t Autoscaler::Clamp(int64_t replicas) const {
  return static_cast<int32_t>(
      std::clamp<int64_t>(replicas, options_.min_replicas, options_.max_replicas));
}

AutoscaleDecision Autoscaler::Decide(int64_t now_ms, int32_t current) {
  const double target = options_.target_in_flight;
  const double offered = BurstLoad(now_ms);
  // Held requests get what drains them within drain_ms: each holds a slot for service_s.
  const double service_s = service_s_ > 0 ? service_s_ : 1.0;
  const double drain = queued_ * service_s * 1000 / static_cast<double>(options_.drain_ms);
  const double load = offered + drain;
  const int64_t want = load > 0 || queued_ > 0 ? std::max<int64_t>(1, CeilCount(load / target)) : 0;

  stable_.push_back({now_ms, offered});
  stable_sum_ += offered;
  while (!stable_.empty() && stable_.front().at_ms <= now_ms - options_.stable_window_ms) {
    stable_sum_ -= stable_.front().load;
    stable_.pop_front();
  }
  const double mean = stable_.empty() ? 0 : stable_sum_ / static_cast<double>(stable_.size());
  double peak = 0;
  for (const Point& p : stable_) peak = std::max(peak, p.load);
  const std::string seen = "load " + Fixed(offered) + " in flight offered over " +
                           std::to_string(options_.burst_window_ms / 1000) + " s" +
                           (queued_ > 0 ? ", " + Fixed(queued_) + " held" : "");

  // Up at once: past the held count's target (replicas still loading included) by the
  // tolerance, or anything held while it has none.
  const bool over = current == 0
                        ? want > 0
                        : load > static_cast<double>(current) * target * (1 + options_.tolerance);
  if (want > current && over && current < options_.max_replicas) {
    last_up_ms_ = now_ms;
    const int32_t up = Clamp(want);
    return {up, "up: " + seen + " needs " + std::to_string(want) + " at " + Fixed(target) +
                    " per replica" +
                    (up < want ? " (max_replicas " + std::to_string(up) + ")" : "")};
  }
  if (current < options_.min_replicas) {
    return {options_.min_replicas, "up to min_replicas " + std::to_string(options_.min_replicas)};
  }
  if (current > options_.max_replicas) {
    return {options_.max_replicas, "down to max_replicas " + std::to_string(options_.max_replicas)};
  }

  const bool idle = last_request_ms_ < 0 || now_ms - last_request_ms_ >= options_.idle_to_zero_ms;
  if (idle && options_.min_replicas == 0 && current > 0) {
    return {0, "to zero: no request for " + std::to_string(options_.idle_to_zero_ms / 1000) + " s"};
  }
  // Down to the window's mean, never so low that its peak would ask for a step up.
  const int64_t keep = std::max<int64_t>(
      {1, want, CeilCount(mean / target),
       CeilCount(peak * (1 + options_.down_headroom) / (target * (1 + options_.tolerance)))});
  const int32_t floor = Clamp(keep);
  if (floor < current && queued_ == 0 && now_ms - last_up_ms_ >= options_.stable_window_ms) {
    return {floor, "down: load " + Fixed(mean) + " in flight on average, " + Fixed(peak) +
                       " at most, over the last " +
                       std::to_string(options_.stable_window_ms / 1000) + " s"};
  }
  return {current, "steady: " + seen};
}

}  // namespace gpupool
