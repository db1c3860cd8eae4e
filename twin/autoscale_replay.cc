#include "twin/autoscale_replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>

#include "scheduler/autoscaler.h"
#include "twin/synthetic.h"

namespace gpupool::twin {
namespace {

int32_t Clamp(int64_t n, const ServiceLoad& load) {
  return static_cast<int32_t>(std::clamp<int64_t>(n, load.min_replicas, load.max_replicas));
}

int64_t Ceil(double v) { return static_cast<int64_t>(std::ceil(v - 1e-9)); }

// Demand samples over a trailing window, averaged.
class Window {
 public:
  explicit Window(int64_t span_ms) : span_ms_(span_ms) {}
  void Add(int64_t now_ms, double v) {
    samples_.push_back({now_ms, v});
    sum_ += v;
    while (!samples_.empty() && samples_.front().first <= now_ms - span_ms_) {
      sum_ -= samples_.front().second;
      samples_.pop_front();
    }
  }
  double Mean() const { return samples_.empty() ? 0 : sum_ / static_cast<double>(samples_.size()); }
  bool AllZero() const {
    return std::all_of(samples_.begin(), samples_.end(),
                       [](const auto& s) { return s.second == 0; });
  }

 private:
  int64_t span_ms_;
  std::deque<std::pair<int64_t, double>> samples_;
  double sum_ = 0;
};

class GpupoolPolicy final : public ScalingPolicy {
 public:
  explicit GpupoolPolicy(const ServiceLoad& load)
      // The rest as the service controller leaves them: the defaults.
      : scaler_(AutoscalerOptions{.min_replicas = load.min_replicas,
                                  .max_replicas = load.max_replicas,
                                  .target_in_flight = load.target_in_flight}) {}
  int32_t Tick(int64_t now_ms, const ServiceLoadSample& seen, int32_t current) override {
    scaler_.Observe(now_ms, seen);
    return scaler_.Decide(now_ms, current).replicas;
  }

 private:
  Autoscaler scaler_;
};

// Knative's KPA: decisions every 2 s.
class KpaPolicy final : public ScalingPolicy {
 public:
  explicit KpaPolicy(const ServiceLoad& load) : load_(load), stable_(60'000), panic_(6'000) {}
  int32_t Tick(int64_t now_ms, const ServiceLoadSample& seen, int32_t current) override {
    const double demand = seen.in_flight + seen.queued;
    stable_.Add(now_ms, demand);
    panic_.Add(now_ms, demand);
    if (now_ms < next_ms_) return current;
    next_ms_ = now_ms + 2'000;
    const double target = load_.target_in_flight;
    const int64_t want_stable = Ceil(stable_.Mean() / target);
    const int64_t want_panic = Ceil(panic_.Mean() / target);
    // From zero, any request is a panic (the activator holds it and pokes the autoscaler).
    if ((current > 0 && static_cast<double>(want_panic) >= 2.0 * current) ||
        (current == 0 && demand > 0)) {
      panic_until_ms_ = now_ms + 60'000;
    }
    int64_t want = want_stable;
    if (now_ms < panic_until_ms_) {
      want = std::max<int64_t>({current, want_panic, want_stable});  // never down in panic
    } else if (want < current) {
      want = std::max<int64_t>(want, current / 2);  // max scale-down rate 2 (floored)
    }
    if (want == 0 && !stable_.AllZero()) want = 1;
    return Clamp(want, load_);
  }

 private:
  ServiceLoad load_;
  Window stable_, panic_;
  int64_t next_ms_ = 0;
  int64_t panic_until_ms_ = -1;
};

// Kubernetes' HPA: a sync every 15 s.
class HpaPolicy final : public ScalingPolicy {
 public:
  explicit HpaPolicy(const ServiceLoad& load) : load_(load), period_(15'000) {}
  int32_t Tick(int64_t now_ms, const ServiceLoadSample& seen, int32_t current) override {
    period_.Add(now_ms, seen.in_flight + seen.queued);
    if (now_ms < next_ms_) return current;
    next_ms_ = now_ms + 15'000;
    const int32_t floor = std::max(1, load_.min_replicas);
    const int32_t have = std::max(current, 1);
    const double ratio = period_.Mean() / (load_.target_in_flight * have);
    int64_t rec = have;
    if (std::abs(ratio - 1) > 0.10) rec = Ceil(have * ratio);
    rec = std::clamp<int64_t>(rec, floor, load_.max_replicas);
    recs_.push_back({now_ms, rec});
    while (recs_.front().first <= now_ms - 300'000) recs_.pop_front();
    if (rec > have)
      return static_cast<int32_t>(std::min<int64_t>(rec, std::max(2 * have, have + 4)));
    int64_t highest = 0;
    for (const auto& r : recs_) highest = std::max(highest, r.second);
    return static_cast<int32_t>(
        std::clamp<int64_t>(std::min<int64_t>(highest, have), floor, load_.max_replicas));
  }

 private:
  ServiceLoad load_;
  Window period_;
  int64_t next_ms_ = 0;
  std::deque<std::pair<int64_t, int64_t>> recs_;
};

// Ray Serve: 30 s look-back, 30 s upscale and 600 s downscale delays.
class RayPolicy final : public ScalingPolicy {
 public:
  explicit RayPolicy(const ServiceLoad& load) : load_(load), look_back_(30'000) {}
  int32_t Tick(int64_t now_ms, const ServiceLoadSample& seen, int32_t current) override {
    look_back_.Add(now_ms, seen.in_flight + seen.queued);
    if (current == 0 && seen.queued > 0) return Clamp(1, load_);  // from zero at once
    const int64_t want = std::clamp<int64_t>(Ceil(look_back_.Mean() / load_.target_in_flight),
                                             load_.min_replicas, load_.max_replicas);
    if (want > current) {
      if (above_since_ < 0) above_since_ = now_ms;
      below_since_ = -1;
      if (now_ms - above_since_ >= 30'000) {
        above_since_ = -1;
        return static_cast<int32_t>(want);
      }
    } else if (want < current) {
      if (below_since_ < 0) below_since_ = now_ms;
      above_since_ = -1;
      if (now_ms - below_since_ >= 600'000) {
        below_since_ = -1;
        return static_cast<int32_t>(want);
      }
    } else {
      above_since_ = below_since_ = -1;
    }
    return current;
  }

 private:
  ServiceLoad load_;
  Window look_back_;
  int64_t above_since_ = -1, below_since_ = -1;
};

double RateAt(const ServiceLoad& s, double t_s) {
  for (const auto& q : s.silences) {
    if (t_s >= static_cast<double>(q.start_s) && t_s < static_cast<double>(q.end_s)) return 0;
  }
  double rate = s.peak_rps * DiurnalFactor(static_cast<int64_t>(t_s), s.peak_hour);
  for (const auto& b : s.bursts) {
    if (t_s >= static_cast<double>(b.start_s) && t_s < static_cast<double>(b.end_s)) {
      rate *= b.factor;
    }
  }
  return rate;
}

}  // namespace

Result<std::vector<ServiceLoad>> AutoscaleWorkload(const std::string& name, int services,
                                                   int64_t hours, uint64_t seed) {
  if (name != "diurnal" && name != "bursty" && name != "sparse") {
    return Status::InvalidArgument("workload '" + name + "': expected diurnal, bursty or sparse");
  }
  if (services < 1) return Status::InvalidArgument("services must be ≥ 1");
  if (hours < 1) return Status::InvalidArgument("hours must be ≥ 1");
  SynthRng r(seed * 0x9E3779B97F4A7C15ULL + 17);
  const int64_t span = hours * 3600;
  std::vector<ServiceLoad> out;
  for (int i = 0; i < services; ++i) {
    ServiceLoad s;
    s.name = name + "-" + std::to_string(i);
    s.peak_rps = static_cast<double>(r.LogUniform(10, 100));
    s.peak_hour = static_cast<double>(r.Between(10, 20));
    s.service_s = 0.2 + 0.6 * r.Unit();
    s.slots = static_cast<int32_t>(r.Between(2, 8));
    s.target_in_flight = 0.7 * s.slots;
    s.cold_start_s = static_cast<double>(r.Between(10, 40));
    s.max_replicas = 1000;
    if (name == "bursty") {
      // Step bursts: on average one every 45 minutes, 2–15 minutes long, 2–5× the rate.
      for (double t = r.Exponential(1.0 / 2700); t < static_cast<double>(span);
           t += r.Exponential(1.0 / 2700)) {
        const int64_t start = static_cast<int64_t>(t);
        s.bursts.push_back({start, start + r.Between(120, 900), 2 + 3 * r.Unit()});
      }
    } else if (name == "sparse") {
      // Sessions between silences: the service is idle most of the time, a scale-to-zero case.
      s.peak_rps = static_cast<double>(r.LogUniform(2, 30));
      int64_t t = 0;
      while (t < span) {
        const int64_t quiet = r.Between(600, 3600);
        s.silences.push_back({t, t + quiet, 0});
        t += quiet + r.Between(120, 1200);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::unique_ptr<ScalingPolicy>> MakeScalingPolicy(const std::string& name,
                                                         const ServiceLoad& load) {
  AutoscalerOptions check{.min_replicas = load.min_replicas,
                          .max_replicas = load.max_replicas,
                          .target_in_flight = load.target_in_flight};
  if (Status st = check.Check(); !st.ok()) return st.WithContext("service " + load.name);
  if (name == "gpupool") return std::unique_ptr<ScalingPolicy>(new GpupoolPolicy(load));
  if (name == "kpa") return std::unique_ptr<ScalingPolicy>(new KpaPolicy(load));
  if (name == "hpa") return std::unique_ptr<ScalingPolicy>(new HpaPolicy(load));
  if (name == "ray") return std::unique_ptr<ScalingPolicy>(new RayPolicy(load));
  return Status::InvalidArgument("policy '" + name + "': expected gpupool, kpa, hpa or ray");
}

Result<AutoscaleResult> ReplayAutoscale(const std::vector<ServiceLoad>& loads,
                                        const std::string& policy, int64_t hours, uint64_t seed,
                                        int64_t tick_ms) {
  if (tick_ms <= 0) return Status::InvalidArgument("tick_ms must be > 0");
  AutoscaleResult out;
  out.policy = policy;
  std::map<int64_t, int64_t> waits;  // wait in 10 ms steps → requests
  double reaction_sum = 0;
  int64_t reactions = 0;
  const double dt = static_cast<double>(tick_ms) / 1000;
  const int64_t end_ms = hours * 3'600'000;
  for (size_t i = 0; i < loads.size(); ++i) {
    const ServiceLoad& s = loads[i];
    GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<ScalingPolicy> p, MakeScalingPolicy(policy, s));
    std::mt19937_64 rng(seed * 1'000'003 + i);
    std::deque<std::pair<double, int64_t>> queue;    // (arrival s, count), FIFO
    std::deque<std::pair<double, int64_t>> serving;  // (finish s, count)
    std::deque<double> ready_at;                     // per replica held, sorted
    int64_t in_service = 0, queued = 0;
    int64_t was_ready = 0;
    double cold_start_seen_s = 0;  // the last cold start's wait for its first request, as measured
    int last_dir = 0;
    size_t next_burst = 0;
    int64_t burst_waiting_from = -1;  // ms: a burst overloaded the service, no step up yet
    const int32_t start = std::max(s.min_replicas, 0);
    for (int32_t k = 0; k < start; ++k) ready_at.push_back(0);
    for (int64_t now = 0; now < end_ms; now += tick_ms) {
      const double t = static_cast<double>(now) / 1000;
      while (!serving.empty() && serving.front().first <= t) {
        in_service -= serving.front().second;
        serving.pop_front();
      }
      std::poisson_distribution<int64_t> arrivals(RateAt(s, t) * dt);
      const int64_t a = arrivals(rng);
      if (a > 0) {
        queue.push_back({t, a});
        queued += a;
        out.requests += a;
      }
      const int64_t ready = static_cast<int64_t>(
          std::upper_bound(ready_at.begin(), ready_at.end(), t) - ready_at.begin());
      if (was_ready == 0 && ready > 0 && !queue.empty())
        cold_start_seen_s = t - queue.front().first;
      was_ready = ready;
      int64_t free = ready * s.slots - in_service;
      while (free > 0 && !queue.empty()) {
        auto& [arrived, n] = queue.front();
        const int64_t take = std::min(free, n);
        const double wait = t - arrived;
        waits[std::llround(wait * 100)] += take;
        if (wait > s.deadline_s) out.late += take;
        serving.push_back({t + s.service_s, take});
        in_service += take;
        queued -= take;
        free -= take;
        n -= take;
        if (n == 0) queue.pop_front();
      }
      const int32_t current = static_cast<int32_t>(ready_at.size());
      while (next_burst < s.bursts.size() && now >= s.bursts[next_burst].end_s * 1000) {
        ++next_burst;  // over without overloading what the service held
      }
      // A burst whose load needs more than every slot of the replicas held at its start: the
      // clock runs from its start until the policy steps up.
      while (next_burst < s.bursts.size() && now >= s.bursts[next_burst].start_s * 1000) {
        if (RateAt(s, t) * s.service_s > static_cast<double>(current) * s.slots &&
            burst_waiting_from < 0) {
          burst_waiting_from = s.bursts[next_burst].start_s * 1000;
        }
        ++next_burst;
      }
      // The gateway's view: it counts arrivals and measures each request's time on a replica.
      const ServiceLoadSample seen{.in_flight = static_cast<double>(in_service),
                                   .queued = static_cast<double>(queued),
                                   .arrivals_per_s = static_cast<double>(a) / dt,
                                   .service_s = s.service_s,
                                   .cold_start_s = cold_start_seen_s};
      const int32_t want = p->Tick(now, seen, current);
      if (want != current) {
        ++out.steps;
        const int dir = want > current ? 1 : -1;
        if (last_dir != 0 && dir != last_dir) ++out.direction_changes;
        last_dir = dir;
        if (dir > 0 && burst_waiting_from >= 0) {
          const double r = static_cast<double>(now - burst_waiting_from) / 1000;
          reaction_sum += r;
          out.reaction_max_s = std::max(out.reaction_max_s, r);
          ++reactions;
          burst_waiting_from = -1;
        }
        if (dir > 0) {
          for (int32_t k = current; k < want; ++k) ready_at.push_back(t + s.cold_start_s);
        } else {
          // The ones still loading go first, then the newest.
          ready_at.resize(static_cast<size_t>(want));
        }
      }
      out.gpu_seconds += static_cast<double>(ready_at.size()) * s.gpu_per_replica * dt;
    }
    out.late += queued;  // never served within the replay
    for (const auto& [arrived, n] : queue) {
      waits[std::llround((static_cast<double>(end_ms) / 1000 - arrived) * 100)] += n;
    }
  }
  int64_t seen = 0;
  for (const auto& [centis, n] : waits) {
    seen += n;
    if (static_cast<double>(seen) >= 0.99 * static_cast<double>(out.requests)) {
      out.wait_p99_s = static_cast<double>(centis) / 100;
      break;
    }
  }
  if (reactions > 0) out.reaction_mean_s = reaction_sum / static_cast<double>(reactions);
  return out;
}

}  // namespace gpupool::twin
