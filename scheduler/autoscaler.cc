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
  if (held_persist_ms < 0) return Status::InvalidArgument("held_persist_ms must be ≥ 0");
  if (hold_ms <= 0) return Status::InvalidArgument("hold_ms must be > 0");
  if (!(tolerance >= 0)) return Status::InvalidArgument("tolerance must be ≥ 0");
  if (!(noise_sigmas >= 0)) return Status::InvalidArgument("noise_sigmas must be ≥ 0");
  if (!(stable_sigmas >= 0)) return Status::InvalidArgument("stable_sigmas must be ≥ 0");
  if (!(down_margin >= 0 && down_margin < 1)) {
    return Status::InvalidArgument("down_margin must be in [0, 1)");
  }
  if (!(down_sigmas >= 0 && down_sigmas <= noise_sigmas)) {
    return Status::InvalidArgument("down_sigmas must be in [0, noise_sigmas]");
  }
  if (relapse_ms < 0) return Status::InvalidArgument("relapse_ms must be ≥ 0");
  if (!(relapse_margin >= 0 && relapse_margin < 1)) {
    return Status::InvalidArgument("relapse_margin must be in [0, 1)");
  }
  return Status::Ok();
}

Autoscaler::Autoscaler(AutoscalerOptions options)
    : options_(options),
      burst_(options.burst_window_ms, options.stable_window_ms),
      mid_(std::min(options.stable_window_ms, 5 * options.burst_window_ms),
           options.stable_window_ms),
      stable_(options.stable_window_ms, options.stable_window_ms) {}

void Autoscaler::Window::Add(int64_t now_ms, double value) {
  samples_.push_back({now_ms, value});
  sum_ += value;
  while (samples_.front().at_ms <= now_ms - span_ms_) {
    sum_ -= samples_.front().value;
    samples_.pop_front();
  }
  // A running sum drifts; a window of zeros must read exactly zero (the idle test).
  if (samples_.size() == 1) {
    sum_ = value;
  } else if (sum_ < 1e-9) {
    sum_ = 0;
  }
  const double m = mean();
  while (!peaks_.empty() && peaks_.back().value <= m) peaks_.pop_back();
  peaks_.push_back({now_ms, m});
  while (peaks_.front().at_ms <= now_ms - peak_ms_) peaks_.pop_front();
}

void Autoscaler::Observe(int64_t now_ms, const ServiceLoadSample& s) {
  if (s.service_s > 0) service_s_ = s.service_s;
  if (s.cold_start_s > 0) cold_start_s_ = s.cold_start_s;
  in_flight_ = std::max(0.0, s.in_flight);
  queued_ = std::max(0.0, s.queued);
  // Little's law where the service time is known; until then what is in flight is the load.
  const double offered = service_s_ > 0 ? std::max(0.0, s.arrivals_per_s) * service_s_ : in_flight_;
  burst_.Add(now_ms, offered);
  mid_.Add(now_ms, offered);
  stable_.Add(now_ms, offered);
  while (!held_least_.empty() && held_least_.back().value >= queued_) held_least_.pop_back();
  held_least_.push_back({now_ms, queued_});
  while (held_least_.size() > 1 && held_least_.front().at_ms <= now_ms - options_.held_persist_ms) {
    held_least_.pop_front();
  }
  if (queued_ > 0 && in_flight_ == 0) {
    if (unserved_since_ms_ < 0) unserved_since_ms_ = now_ms;
  } else {
    unserved_since_ms_ = -1;
  }
  if (in_flight_ + queued_ + std::max(0.0, s.arrivals_per_s) > 0) last_request_ms_ = now_ms;
}

double Autoscaler::ServiceS() const { return service_s_ > 0 ? service_s_ : 1.0; }

double Autoscaler::Noise(double load, int64_t span_ms) const {
  // Poisson arrivals at rate λ seen over w seconds: the offered load λ·s has a standard
  // deviation of √(λ·s·s / w).
  return std::sqrt(load * ServiceS() / (static_cast<double>(span_ms) / 1000));
}

double Autoscaler::UpThreshold(int64_t replicas, int64_t span_ms, double tolerance,
                               double sigmas) const {
  const double at = static_cast<double>(replicas) * options_.target_in_flight * (1 + tolerance);
  return at + sigmas * Noise(at, span_ms);
}

int64_t Autoscaler::CountFor(double load, int64_t span_ms, double tolerance, double sigmas) const {
  // UpThreshold(n) = a·n + b·√n: solve for √n, then settle the rounding.
  const double a = options_.target_in_flight * (1 + tolerance);
  const double b = sigmas * Noise(a, span_ms);
  const double root = (-b + std::sqrt(b * b + 4 * a * std::max(0.0, load))) / (2 * a);
  int64_t n = std::max<int64_t>(1, CeilCount(root * root));
  while (n > 1 && load <= UpThreshold(n - 1, span_ms, tolerance, sigmas)) --n;
  while (load > UpThreshold(n, span_ms, tolerance, sigmas)) ++n;
  return n;
}

double Autoscaler::DrainLoad(int64_t now_ms) const {
  const double per_held = ServiceS() * 1000 / static_cast<double>(options_.drain_ms);
  double drain = (held_least_.empty() ? 0 : held_least_.front().value) * per_held;
  if (unserved_since_ms_ >= 0) {
    // Nothing is served yet: the replicas asked for will find the backlog grown by what
    // arrives until they are ready; they are sized to drain that one. Until a cold start has
    // been measured, one that has lasted t is expected to last t more; never past the time
    // the gateway holds a request (older ones are answered 503 and gone from the backlog).
    const double waited_s = static_cast<double>(now_ms - unserved_since_ms_) / 1000;
    const double hold_s = static_cast<double>(options_.hold_ms) / 1000;
    const double left_s = std::clamp(cold_start_s_ > 0 ? cold_start_s_ - waited_s : waited_s, 0.0,
                                     std::max(0.0, hold_s - waited_s));
    drain += burst_.mean() / ServiceS() * left_s * per_held;
  }
  if (queued_ > 0) {
    // Requests are held, so the ready replicas' slots are all busy: what they serve beyond the
    // arrivals drains the backlog already.
    drain = std::max(0.0, drain - std::max(0.0, in_flight_ - burst_.mean()));
  }
  return drain;
}

int64_t Autoscaler::DownFloor(int64_t now_ms, int32_t current, double fast) const {
  const double target = options_.target_in_flight;
  const double tol = options_.tolerance;
  const double sigmas = options_.noise_sigmas - options_.down_sigmas;
  int64_t keep =
      std::max<int64_t>({1, CeilCount(stable_.mean() / target), CeilCount(fast / target)});
  while (keep < current &&
         (stable_.mean() > static_cast<double>(keep) * target * (1 - options_.down_margin) ||
          burst_.peak() > UpThreshold(keep, burst_.span_ms(), tol, sigmas) ||
          mid_.peak() > UpThreshold(keep, mid_.span_ms(), tol, sigmas))) {
    ++keep;
  }
  for (const auto& [count, fell] : short_) {  // ascending: a raised floor meets the next ones
    if (count >= keep && count < current && now_ms - fell.at_ms < options_.relapse_ms &&
        stable_.mean() > fell.load * (1 - options_.relapse_margin)) {
      keep = count + 1;
    }
  }
  return keep;
}

void Autoscaler::RememberShort(int64_t now_ms, int32_t current) {
  std::erase_if(short_,
                [&](const auto& e) { return now_ms - e.second.at_ms >= options_.relapse_ms; });
  // Only a count held a whole stable window (its replicas ready) fell short; the steps of one
  // climb did not.
  if (current == 0 || now_ms - last_up_ms_ < options_.stable_window_ms) return;
  auto [it, fresh] = short_.try_emplace(current, Short{stable_.mean(), now_ms});
  if (!fresh) it->second = {std::min(it->second.load, stable_.mean()), now_ms};
}

int32_t Autoscaler::Clamp(int64_t replicas) const {
  return static_cast<int32_t>(
      std::clamp<int64_t>(replicas, options_.min_replicas, options_.max_replicas));
}

AutoscaleDecision Autoscaler::Decide(int64_t now_ms, int32_t current) {
  const double target = options_.target_in_flight;
  const double fast = burst_.mean() + DrainLoad(now_ms);
  const std::string seen = "load " + Fixed(burst_.mean()) + " in flight offered over " +
                           std::to_string(options_.burst_window_ms / 1000) + " s" +
                           (queued_ > 0 ? ", " + Fixed(queued_) + " held" : "");

  // Up at once when a window's load is past the held count's target (replicas still loading
  // included) by more than its noise; the 2 s window answers a step, the longer ones a rise
  // too small to tell from noise in 2 s. Anything held while it has none.
  int64_t want = -1;
  if (current == 0) {
    const bool asked = queued_ > 0 || (last_request_ms_ >= 0 &&
                                       now_ms - last_request_ms_ < options_.burst_window_ms);
    if (asked) want = std::max<int64_t>(1, CeilCount(fast / target));
  } else {
    const Trigger triggers[] = {
        {&burst_, fast, options_.tolerance, options_.noise_sigmas},
        {&mid_, mid_.mean(), options_.tolerance, options_.noise_sigmas},
        {&stable_, stable_.mean(), 0, options_.stable_sigmas},
    };
    for (const Trigger& t : triggers) {
      const int64_t span = t.window->span_ms();
      if (t.load <= UpThreshold(current, span, t.tolerance, t.sigmas)) continue;
      // While replicas serve, 2 s of a noisy peak ask for the least count at which they would
      // not have stepped up: a peak gets one replica more, a step most of what it needs at
      // once and the rest when the 10 s window confirms it. A longer window, or a cold start,
      // gets what its load needs.
      const int64_t n = in_flight_ > 0 && t.window == &burst_
                            ? CountFor(t.load, span, t.tolerance, t.sigmas)
                            : CeilCount(t.load / target);
      want = std::max({want, n, int64_t{current} + 1});
    }
  }
  if (want > current && current < options_.max_replicas) {
    RememberShort(now_ms, current);
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
  if (queued_ > 0 || now_ms - last_up_ms_ < options_.stable_window_ms) {
    return {current, "steady: " + seen};
  }
  const int32_t floor = Clamp(DownFloor(now_ms, current, fast));
  if (floor < current) {
    return {floor, "down: load " + Fixed(stable_.mean()) + " in flight on average, " +
                       Fixed(burst_.peak()) + " at most, over the last " +
                       std::to_string(options_.stable_window_ms / 1000) + " s"};
  }
  return {current, "steady: " + seen};
}

}  // namespace gpupool
