// Recorder: the twin's own ledger of what runs where, and the statistics a TwinReport holds.
//
// It hears what the simulated agents hear — a start with its device grants, an exit — plus
// arrivals and samples, and keeps: per device the compute granted (so allocation and
// fragmentation are the agents' view, not the core's bookkeeping), per quota'd group its usage
// (checked against the org tree's limits at every start), per task its waits and preemptions.
// Time-averages integrate piecewise-constant values between events from `warmup_us` on.
//
// Thread safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/dispatch.h"
#include "twin/org_tree.h"
#include "twin/report.h"
#include "twin/workload.h"

namespace gpupool::twin {

class Recorder {
 public:
  struct Grant {
    std::string device;
    int64_t milli_tflops = 0;
  };

  // `min_runtime_us` per class name; `limits`/`guarantees` per quota'd group in milli-TFLOPS.
  Recorder(const Workload& w, const OrgTree& org, int64_t offered_per_gpu,
           std::map<std::string, int64_t> min_runtime_us, int64_t warmup_us,
           int64_t guarantee_grace_us);

  void Arrive(size_t task, int64_t now);
  void Rejected(size_t task);
  void Start(size_t task, int64_t now, const std::vector<Grant>& grants);
  // The attempt ended: finished, or stopped (preempted: the core asked with StopIntent kPreempt).
  // `lost_gpu_s` is what the preempted attempt's work was worth (0 when it resumes).
  void End(size_t task, int64_t now, bool preempted, double lost_gpu_s);
  void Sample(int64_t now, int64_t queue_depth);
  // Closes the integrals at the horizon and builds the report (series thinned to `points`).
  TwinReport Finish(int64_t horizon_us, int points);

 private:
  struct TaskState {
    int64_t arrival = 0;
    int64_t waiting_since = -1;  // -1: not waiting
    int64_t attempt_start = -1;  // -1: not holding devices
    bool started_once = false;
    int preemptions = 0;
    int64_t last_preempted = -1;
    std::vector<Grant> grants;
  };
  struct Group {
    int64_t guaranteed = 0, limit = 0, used = 0;  // milli-TFLOPS
    // Waiting tasks by need (milli-TFLOPS), each ordered by since.
    std::map<int64_t, std::set<std::pair<int64_t, size_t>>> waiting;
    double area = 0;
    int64_t below_samples = 0, with_waiting = 0;
    double below_s = 0;
    std::vector<std::pair<double, double>> share;
  };

  void Advance(int64_t now);
  void StopWaiting(size_t task);
  void StartWaiting(size_t task, int64_t now);
  Group* GroupOfTask(size_t task);
  double FragGpus() const;

  const Workload& w_;
  const OrgTree& org_;
  int64_t offered_per_gpu_;
  int64_t gpu_;  // milli-TFLOPS of one physical GPU
  std::map<std::string, int64_t> min_runtime_us_;
  int64_t warmup_us_, grace_us_;
  std::vector<TaskState> tasks_;
  std::vector<std::string> group_of_task_;
  std::map<std::string, Group> groups_;
  std::unordered_map<std::string, int64_t> device_alloc_;  // milli-TFLOPS granted per device
  std::vector<double> shapes_;  // per-device demands of the workload (fraction of a GPU), sorted

  int64_t last_ = 0;
  double alloc_phys_ = 0;  // GPUs granted now, each device counted at most once
  double alloc_off_ = 0;   // GPUs of offered (overcommitted) capacity granted now
  int64_t demand_ = 0;     // milli-GPU of arrived, unfinished tasks
  double alloc_area_ = 0, alloc_off_area_ = 0, demand_area_ = 0, frag_area_ = 0, queue_area_ = 0;
  double last_frag_ = 0;
  int64_t last_queue_ = 0;
  int64_t last_sample_ = -1;

  std::map<std::string, std::vector<double>> waits_by_class_, waits_by_tenant_, waits_by_group_,
      requeue_by_class_;
  std::vector<SeriesPoint> series_;
  TwinReport r_;
};

}  // namespace gpupool::twin
