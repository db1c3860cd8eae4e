// Synthetic workloads with time (synthetic.h): the daily curves, the placement generators'
// time columns and the GPU-cloud workload.
#include "twin/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

namespace gpupool::twin {
namespace {

constexpr int64_t kHourS = 3'600;
constexpr int64_t kGiB = 1024;

double HourOfDay(int64_t t_s) {
  const int64_t in_day = ((t_s % kDayS) + kDayS) % kDayS;
  return static_cast<double>(in_day) / kHourS;
}

// The mean of log-uniform on [lo, hi]: (hi − lo) / ln(hi / lo).
double LogUniformMean(int64_t lo, int64_t hi) {
  return static_cast<double>(hi - lo) / std::log(static_cast<double>(hi) / static_cast<double>(lo));
}

// A pod that was running before t = 0 starts at 0 with what it had left; false: it had ended.
bool ClipToStart(SynthPod* p) {
  if (p->deletion_s <= 0) return false;
  p->creation_s = std::max<int64_t>(0, p->creation_s);
  return true;
}

// Arrival times in [from, to) of a Poisson process of rate `peak_rate × shape(t) / shape_max`,
// by thinning.
template <typename Shape>
std::vector<int64_t> Arrivals(SynthRng& r, double peak_rate, double shape_max, int64_t from,
                              int64_t to, Shape shape) {
  std::vector<int64_t> out;
  if (peak_rate <= 0) return out;
  double t = static_cast<double>(from);
  while (true) {
    t += r.Exponential(peak_rate);
    if (t >= static_cast<double>(to)) break;
    const auto s = static_cast<int64_t>(t);
    if (r.Unit() * shape_max < shape(s)) out.push_back(s);
  }
  return out;
}

// Inference services: replicas of one slice size, scaled every 5 minutes to
// max(1, ⌈peak × DiurnalFactor⌉); the newest replica goes first when the curve falls.
void InferenceServices(SynthRng& r, const GpuCloudOptions& o, double gpus, int64_t span,
                       std::vector<SynthPod>* out) {
  const int services = 3 * o.nodes_per_model;
  std::vector<int64_t> weight(static_cast<size_t>(services));
  int64_t total = 0;
  for (int64_t& w : weight) total += (w = r.Between(1, 4) * r.Between(1, 4));
  const double target = 0.40 * o.load * gpus;  // time-averaged GPUs of all replicas
  const std::vector<int32_t> slices = {100, 200, 250, 500};
  constexpr int64_t kStep = 300;
  for (int s = 0; s < services; ++s) {
    const int32_t g = slices[r.Pick({3, 3, 2, 2})];
    const double peak_hour = static_cast<double>(r.Between(10, 20));
    const int64_t cores = r.Between(1, 4), mem_gib = r.Between(2, 16);
    const double share =
        target * static_cast<double>(weight[static_cast<size_t>(s)]) / static_cast<double>(total);
    // share = peak × (g / 1000) × 0.6 on average over the day.
    const double peak = share / (static_cast<double>(g) / 1000.0 * 0.6);
    const std::string svc = "svc" + std::to_string(s);
    std::vector<size_t> alive;  // indices into *out, oldest first
    int serial = 0;
    for (int64_t t = 0; t < span; t += kStep) {
      const auto want =
          static_cast<size_t>(std::max(1.0, std::ceil(peak * DiurnalFactor(t, peak_hour) - 1e-9)));
      while (alive.size() < want) {
        SynthPod p;
        p.name = "gpu-cloud-" + svc + "-r" + std::to_string(serial++);
        p.cpu_milli = cores * 1000;
        p.memory_mib = mem_gib * kGiB;
        p.num_gpu = 1;
        p.gpu_milli = g;
        p.qos = "LS";
        p.creation_s = t;
        p.deletion_s = span;  // until scaled down, or the end
        p.owner = svc;
        alive.push_back(out->size());
        out->push_back(std::move(p));
      }
      while (alive.size() > want) {
        (*out)[alive.back()].deletion_s = t;
        alive.pop_back();
      }
    }
  }
}

// Training: bursts (a sweep of 1–6 jobs by one project within 10 minutes) at a constant rate;
// each job 1, 2 or 4 whole 8-GPU H100/A100 nodes, or 1 or 2 whole 4-GPU L40S nodes.
void TrainingGangs(SynthRng& r, const GpuCloudOptions& o, double gpus, int64_t span,
                   std::vector<SynthPod>* out) {
  constexpr int64_t kMin = 2 * kHourS, kMax = 48 * kHourS;
  // E[GPUs per job] = 0.7 × 8 × (0.5·1 + 0.3·2 + 0.2·4) + 0.3 × 4 × (2/3·1 + 1/3·2)
  const double job_gpus = 0.7 * 8 * 1.9 + 0.3 * 4 * (4.0 / 3.0);
  const double per_burst = 3.5 * job_gpus * LogUniformMean(kMin, kMax);  // GPU-seconds
  const double rate = 0.35 * o.load * gpus / per_burst;
  int job = 0;
  for (int64_t t0 : Arrivals(r, rate, 1, -kMax, span, [](int64_t) { return 1.0; })) {
    const int64_t jobs = r.Between(1, 6);
    const std::string owner = "proj" + std::to_string(r.Below(12));
    for (int64_t j = 0; j < jobs; ++j) {
      const bool big = r.Pick({7, 3}) == 0;
      // At most the nodes there are of the kind (a small cluster's gangs still fit).
      const int members = std::min(big ? std::vector<int>{1, 2, 4}[r.Pick({5, 3, 2})]
                                       : std::vector<int>{1, 2}[r.Pick({2, 1})],
                                   big ? 2 * o.nodes_per_model : o.nodes_per_model);
      const int per = big ? 8 : 4;
      const int64_t cores = big ? r.Between(64, 120) : r.Between(32, 60);
      const int64_t mem_gib = big ? r.Between(512, 1000) : r.Between(256, 480);
      const int64_t created = t0 + r.Between(0, 600);
      const int64_t lasts = r.LogUniform(kMin, kMax);
      const std::string id = "gpu-cloud-train" + std::to_string(job++);
      for (int m = 0; m < members; ++m) {
        SynthPod p;
        p.name = id + "-w" + std::to_string(m);
        p.cpu_milli = cores * 1000;
        p.memory_mib = mem_gib * kGiB;
        p.num_gpu = per;
        p.gpu_milli = 1000;
        p.gpu_spec = big ? "H100|A100" : "L40S";
        p.qos = "BE";
        p.creation_s = created;
        p.deletion_s = created + lasts;
        p.owner = owner;
        p.gang = members > 1 ? id : "";
        if (created < span && ClipToStart(&p)) out->push_back(std::move(p));
      }
    }
  }
}

// Notebooks: office-hours arrivals; 80 % a quarter or half of a GPU, 20 % one whole GPU.
void Notebooks(SynthRng& r, const GpuCloudOptions& o, double gpus, int64_t span,
               std::vector<SynthPod>* out) {
  constexpr int64_t kMin = 1 * kHourS, kMax = 10 * kHourS;
  const double mean_rate = 0.10 * o.load * gpus / (0.5 * LogUniformMean(kMin, kMax));
  const double peak_rate = mean_rate * 1.05 / OfficeHoursMean();
  int n = 0;
  for (int64_t t : Arrivals(r, peak_rate, 1.05, -kMax, span, OfficeHoursFactor)) {
    SynthPod p;
    p.name = "gpu-cloud-nb" + std::to_string(n++);
    const bool whole = r.Pick({4, 1}) == 1;
    p.num_gpu = 1;
    p.gpu_milli = whole ? 1000 : (r.Pick({1, 1}) == 0 ? 250 : 500);
    const int64_t cores = r.Between(2, 8);
    p.cpu_milli = cores * 1000;
    p.memory_mib = r.Between(8, 64) * kGiB;
    p.qos = "Burstable";
    p.creation_s = t;
    p.deletion_s = t + r.LogUniform(kMin, kMax);
    p.owner = "user" + std::to_string(r.Below(40));
    if (ClipToStart(&p)) out->push_back(std::move(p));
  }
}

}  // namespace

uint64_t SynthRng::Below(uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng_()) * n) >> 64);
}

int64_t SynthRng::Between(int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo + 1)));
}

bool SynthRng::Chance(int percent) { return Below(100) < static_cast<uint64_t>(percent); }

double SynthRng::Unit() {
  return (static_cast<double>(rng_() >> 11) + 0.5) / 9007199254740992.0;  // 2^53
}

double SynthRng::Exponential(double rate) { return -std::log(Unit()) / rate; }

int64_t SynthRng::LogUniform(int64_t lo, int64_t hi) {
  const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
  return std::clamp<int64_t>(std::llround(std::exp(l + (h - l) * Unit())), lo, hi);
}

size_t SynthRng::Pick(const std::vector<int>& weights) {
  int total = 0;
  for (int w : weights) total += w;
  auto x = static_cast<int64_t>(Below(static_cast<uint64_t>(total)));
  for (size_t i = 0; i < weights.size(); ++i) {
    if (x < weights[i]) return i;
    x -= weights[i];
  }
  return weights.size() - 1;
}

double DiurnalFactor(int64_t t_s, double peak_hour) {
  return 0.6 + 0.4 * std::cos(2 * std::numbers::pi * (HourOfDay(t_s) - peak_hour) / 24);
}

double OfficeHoursFactor(int64_t t_s) {
  const int64_t days = t_s >= 0 ? t_s / kDayS : (t_s - kDayS + 1) / kDayS;  // floor
  const int64_t day = (days % 7 + 7) % 7;                                   // 0: Monday
  const double h = HourOfDay(t_s);
  double office = h >= 8 && h < 19 ? std::sin(std::numbers::pi * (h - 8) / 11) : 0;
  if (day >= 5) office *= 0.15;
  return 0.05 + office;
}

double OfficeHoursMean() {
  static const double mean = [] {
    double sum = 0;
    constexpr int64_t kWeek = 7 * kDayS;
    for (int64_t t = 0; t < kWeek; t += 60) sum += OfficeHoursFactor(t);
    return sum / (kWeek / 60);
  }();
  return mean;
}

void AssignTimes(uint64_t seed, int64_t span_s, std::vector<SynthPod>* pods) {
  SynthRng r(seed ^ 0x7469'6d65'7374'7265ULL);  // "timestre": never the placement stream
  for (SynthPod& p : *pods) {
    int64_t at = 0, lo = 0, hi = 0;
    if (p.num_gpu == 0 || p.num_gpu >= 2) {
      at = r.Between(0, span_s - 1);
      p.qos = "BE";
      lo = p.num_gpu == 0 ? 300 : kHourS;
      hi = p.num_gpu == 0 ? 2 * kHourS : 48 * kHourS;
    } else {
      const bool share = p.gpu_milli < 1000;
      do {  // rejection sampling from the day's curve
        at = r.Between(0, span_s - 1);
      } while (r.Unit() * 1.05 >= (share ? DiurnalFactor(at, 14) : OfficeHoursFactor(at)));
      p.qos = share ? "LS" : "Burstable";
      lo = share ? 600 : 1800;
      hi = share ? 12 * kHourS : 8 * kHourS;
    }
    p.creation_s = at;
    p.deletion_s = at + r.LogUniform(lo, hi);
    p.owner = "proj" + std::to_string(r.Below(32));
  }
}

SynthCluster GenerateGpuCloud(const GpuCloudOptions& o) {
  SynthCluster c;
  struct Kind {
    const char* model;
    int gpus;
    int64_t cores, mem_gib;
  };
  const Kind kinds[] = {
      {"H100", 8, 192, 2048}, {"A100", 8, 128, 1024}, {"L40S", 4, 64, 512}, {"L4", 4, 48, 384}};
  for (const Kind& k : kinds) {
    for (int i = 0; i < o.nodes_per_model; ++i) {
      c.nodes.push_back(SynthNode{"gpu-cloud-node-" + std::to_string(c.nodes.size()),
                                  k.cores * 1000, k.mem_gib * kGiB, k.gpus, k.model});
    }
  }
  double gpus = 0;
  for (const SynthNode& n : c.nodes) gpus += n.gpus;
  const int64_t span = std::max<int64_t>(1, o.hours) * kHourS;
  SynthRng r(o.seed);
  InferenceServices(r, o, gpus, span, &c.pods);
  TrainingGangs(r, o, gpus, span, &c.pods);
  Notebooks(r, o, gpus, span, &c.pods);
  std::stable_sort(c.pods.begin(), c.pods.end(), [](const SynthPod& a, const SynthPod& b) {
    return a.creation_s < b.creation_s;
  });
  return c;
}

std::string PodListCsv(const std::vector<SynthPod>& pods) {
  std::ostringstream out;
  out << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,"
         "owner,gang\n";
  for (const SynthPod& p : pods) {
    out << p.name << "," << p.cpu_milli << "," << p.memory_mib << "," << p.num_gpu << ","
        << p.gpu_milli << "," << p.gpu_spec << "," << p.qos << "," << p.creation_s << ","
        << p.deletion_s << "," << p.owner << "," << p.gang << "\n";
  }
  return out.str();
}

std::string NodeListCsv(const std::vector<SynthNode>& nodes) {
  std::ostringstream out;
  out << "sn,cpu_milli,memory_mib,gpu,model\n";
  for (const SynthNode& n : nodes)
    out << n.name << "," << n.cpu_milli << "," << n.memory_mib << "," << n.gpus << "," << n.model
        << "\n";
  return out.str();
}

}  // namespace gpupool::twin
