// Synthetic workloads with time: the arrival and lifetime processes of bench/workload_gen's
// generators, and the dynamic GPU-cloud workload (`gpu-cloud`), written as pod lists in the
// Alibaba openb CSV format that the twin (workload.h) and gpupool-sim read.
//
//  * Pure and deterministic: a seed gives the same rows on every run and host (mt19937_64 and
//    its own integer draws; exponential gaps use std::log). No I/O, no clock.
//  * Simulated time starts on a Monday at 00:00; `DiurnalFactor` and `OfficeHoursFactor` are the
//    two daily curves every process here uses (docs/twin.md, "Synthetic workloads").
//  * The GPU-cloud workload has three parts whose time-averaged demand is set as a share of the
//    cluster's GPUs times `load`: inference services (40 %: replicas of fractional slices whose
//    count follows a 24-h curve, created as it rises and deleted — newest first — as it falls),
//    training gangs (35 %: 1, 2 or 4 whole nodes for 2–48 h, in bursts of 1–6 jobs), notebooks
//    (10 %: small slices or one GPU for 1–10 h, arriving in office hours). Gangs and notebooks
//    are also drawn before t = 0 and those still running at 0 start there with what they have
//    left, so the replay opens near its steady state.
//
// Thread safety: plain values and functions.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gpupool::twin {

// One pod row: the placement columns (name … gpu_spec, what gpupool-sim reads) then the
// dynamic ones (qos, creation_time and deletion_time in seconds, owner: the name the twin
// hashes to a tenant; gang: pods with one gang id start together, "" alone).
struct SynthPod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;
  std::string gpu_spec;
  std::string qos;
  int64_t creation_s = 0;
  int64_t deletion_s = 0;
  std::string owner;
  std::string gang;
};

struct SynthNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

// Draws for the generators: uniform integers by multiply-shift, doubles in (0, 1).
class SynthRng {
 public:
  explicit SynthRng(uint64_t seed) : rng_(seed) {}
  uint64_t Below(uint64_t n);
  int64_t Between(int64_t lo, int64_t hi);  // inclusive
  bool Chance(int percent);                 // true with probability percent / 100
  double Unit();                            // in (0, 1)
  double Exponential(double rate);          // mean 1 / rate
  // log-uniform on [lo, hi]: as many tasks last 1–10 minutes as 1–10 hours
  int64_t LogUniform(int64_t lo, int64_t hi);
  size_t Pick(const std::vector<int>& weights);

 private:
  std::mt19937_64 rng_;
};

inline constexpr int64_t kDayS = 86'400;
// 0.6 + 0.4 cos(2π (hour − peak_hour) / 24): 1 at the peak hour, 0.2 twelve hours away, mean 0.6.
double DiurnalFactor(int64_t t_s, double peak_hour);
// Office hours: sin(π (hour − 8) / 11) from 08:00 to 19:00 on weekdays (0.15 of that at weekends)
// plus 0.05 around the clock; at most 1.05.
double OfficeHoursFactor(int64_t t_s);
// The mean of OfficeHoursFactor over a week.
double OfficeHoursMean();

// The arrival and lifetime processes of workload_gen's six placement generators, drawn for pods
// whose placement columns are already set, from an RNG stream of their own (`seed` is mixed so
// it never equals the placement draws' stream): the rows, their order and resources stay what
// the placement benchmark sees. By shape, over `span_s` (a week by default):
//   CPU-only          BE         uniform arrivals      5 min – 2 h
//   a GPU share       LS         diurnal (peak 14:00)  10 min – 12 h
//   one whole GPU     Burstable  office hours          30 min – 8 h
//   2 or more GPUs    BE         uniform arrivals      1 h – 48 h
// Lifetimes are log-uniform; the owner is one of 32 projects.
void AssignTimes(uint64_t seed, int64_t span_s, std::vector<SynthPod>* pods);

struct GpuCloudOptions {
  uint64_t seed = 1;
  int64_t hours = 96;        // arrivals in [0, hours)
  double load = 1.0;         // time-averaged demand: 0.85 × load of the GPUs
  int nodes_per_model = 16;  // H100 ×8, A100 ×8, L40S ×4, L4 ×4: 384 GPUs at 16
};

struct SynthCluster {
  std::vector<SynthNode> nodes;
  std::vector<SynthPod> pods;  // by creation time, then as generated
};

SynthCluster GenerateGpuCloud(const GpuCloudOptions& options);

// The CSV texts (headers included): pods as
// name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,owner,gang
// and nodes as sn,cpu_milli,memory_mib,gpu,model.
std::string PodListCsv(const std::vector<SynthPod>& pods);
std::string NodeListCsv(const std::vector<SynthNode>& nodes);

}  // namespace gpupool::twin
