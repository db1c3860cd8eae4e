// Internal state of the Core, shared by core.cc, core_schedule.cc and core_agents.cc.
// Not part of the public API. Single-threaded: only the core's thread touches it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/thread_checker.h"
#include "placement/placement.h"
#include "placement/tentative.h"
#include "placement/workload_feed.h"
#include "scheduler/core.h"
#include "scheduler/device_faults.h"
#include "scheduler/device_slots.h"
#include "scheduler/dispatcher.h"
#include "scheduler/image_locality.h"
#include "scheduler/job_table.h"
#include "scheduler/metering.h"
#include "scheduler/metrics.h"
#include "scheduler/mig_layouts.h"
#include "scheduler/queue_order.h"
#include "scheduler/reservation_book.h"
#include "scheduler/starvation_book.h"
#include "scheduler/task_queue.h"
#include "scheduler/tenancy.h"

namespace gpupool {

// A node as its pool's engine sees it: its devices less MIG parents, with the slots an admin set
// (core_inventory.cc).
placement::NodeSpec ToNodeSpecForAgents(const NodeRecord& n, const DeviceSlotsBook& slots);

// A planned transition of one task (core_change.cc): what its record becomes, built without
// touching memory. Its row is stored first; the rest (allocation released, queues, job state,
// watchers) is applied only once the store has it.
struct TaskChange {
  int64_t job_id = 0;
  int32_t index = 0;
  TaskRecord after;
  std::vector<EventRecord> events;
  std::string transition;       // for the task-transition metric ("SUCCEEDED", "LOST", …)
  std::string note;             // for watchers
  bool preempted = false;       // a preempted task's requeue (its back-off starts)
  bool usage_reported = false;  // after.usage is the ended attempt's sandbox account (a report)
};

// Task changes and the batch that stores them (plus any other mutation of the same event).
struct ChangeSet {
  std::vector<TaskChange> tasks;
  std::vector<Mutation> batch;
  std::map<int64_t, JobState> job_states;  // the state each touched job is stored with
};

// A planned cancel (core_cancel.cc): the task records it stores and the job state it leads to.
struct CancelPlan {
  std::vector<TaskRecord> after;  // the planned records, in task order
  JobState state = JobState::kCancelled;
  int64_t finish_us = 0;
  std::string reason;
  std::vector<Mutation> batch;
};

// Who a pending task may preempt, and by which rule (core_preempt.cc).
struct PreemptorRules {
  bool may_preempt = false;  // its class may preempt lower values
  bool reclaim = false;      // its group stays within its guarantee with it
  bool any_class = false;    // reclaim's second search: victims of any class (core_reclaim.cc)
  std::string group;         // its share group
};

// A placement that failed in a pass for a pool and request shape fails again for an identical
// one (nothing was released in between), so the pass skips it without asking the engine.
struct ShapeKey {
  std::string pool;
  ResourceRequest request;
  friend bool operator<(const ShapeKey& a, const ShapeKey& b) {
    if (a.pool != b.pool) return a.pool < b.pool;
    const ResourceRequest &x = a.request, &y = b.request;
    return std::tie(x.shape, x.fractional.milli_tflops, x.fractional.vram_mib, x.gpu_count,
                    x.models, x.mig_profile, x.cpu_milli, x.memory_mib) <
           std::tie(y.shape, y.fractional.milli_tflops, y.fractional.vram_mib, y.gpu_count,
                    y.models, y.mig_profile, y.cpu_milli, y.memory_mib);
  }
};

// A running task FindVictims may choose, as the core sees it (core_preempt.cc).
struct PreemptionCandidate {
  int64_t job_id = 0;
  int32_t index = 0;
  int32_t value = 0;         // priority class value
  bool borrowed = false;     // started after its group's guarantee was full (ranks cheaper)
  bool reclaimable = false;  // reclaim may take it: its group stays at or above its guarantee
  int32_t gang_size = 1;     // tasks that stop with it
  std::string group;
  placement::RunningTask task;
};

// A share group's standing in a pool for reclaim (core_reclaim.cc): what it keeps once the
// tasks stopping already are gone, against its guarantee (zero: nothing guaranteed).
struct GroupStanding {
  QuotaAmount keeps;
  QuotaAmount guaranteed;
  // Whether it stays at or above its guarantee after losing `lost` as well: in every dimension
  // it is guaranteed, keeps − lost ≥ guaranteed.
  bool Spares(const QuotaAmount& lost) const;
};

// One scheduling pass: what it placed and will persist, and what it learned along the way.
struct PassState {
  struct Placed {
    int64_t job_id;
    int32_t index;
    int32_t attempt;
  };
  // A victim's stop: stored with the pass's batch, sent only once the batch is durable; undone
  // (its record as before, the reservation dropped) if the store refuses the batch.
  struct Stop {
    int64_t job_id;
    int32_t index;
    std::string reason;
    TaskRecord before;
    bool restarting_before;
    int64_t preemptor_job;
  };
  int64_t now = 0;
  std::vector<Placed> placed;
  std::vector<Stop> stops;
  std::vector<int64_t> new_reservations;
  std::vector<Mutation> batch;
  // No room without preemption, and why (text and verdict).
  std::map<ShapeKey, std::pair<std::string, PendingVerdict>> failed;
  // No victims either, per shape and "<priority>/<group>[/reclaim][/any class]".
  std::set<std::pair<ShapeKey, std::string>> preempt_failed;
  std::set<int64_t> gangs_tried;
  std::map<std::string, int32_t> behind;  // pool → tasks of higher priority left pending
  std::map<std::string, QuotaAmount> implicit_share;  // pool → weight of groups without guarantee
  struct CachedShare {
    std::string group;
    uint64_t version = UINT64_MAX;  // TenantBook::version() it was computed at
    std::pair<double, double> share;
  };
  std::map<FairKey, CachedShare> shares;
  // Preemption candidates per pool as of the pass's last placement or stop
  // (core_preempt_cache.cc): every failed task asks for them, and only those two change them.
  struct CachedCandidates {
    size_t placed = 0, stops = 0;
    std::vector<PreemptionCandidate> list;
    std::map<std::string, GroupStanding> groups;  // share group → its standing
  };
  std::map<std::string, CachedCandidates> candidates;
  // Tasks (and gangs) that found no room in this pass (core_starvation.cc): each key once, with
  // the index of the task (a gang's first pending member).
  std::map<StarvingKey, int32_t> starving;
  // pool → MIG profile → tasks that found no room (core_mig_layouts.cc plans for them).
  std::map<std::string, std::map<std::string, int32_t>> mig_waiting;
};

// What the pool's devices can ever offer, for "larger than any device" admission checks.
struct PoolLimits {
  Resources largest_device;       // offered, per dimension
  int32_t most_gpus_on_node = 0;  // whole GPUs (non-MIG devices)
  std::set<std::string> mig_profiles;
  std::set<std::string> models;
};

struct PoolEntry {
  PoolRecord rec;
  std::unique_ptr<placement::Engine> engine;
  // The pool's learned workload (placement/workload_feed.h): fed by accepted submissions (and
  // the retained jobs at recovery), synced into `engine` before each placement.
  placement::WorkloadFeed workload;
  std::set<std::string> nodes;
  PoolLimits limits;
};

struct NodeEntry {
  NodeRecord rec;
  std::map<std::string, int> device_index;  // device id → index in rec.devices
  int64_t last_seen_us = 0;                 // monotonic: the last lease renewal granted
  bool tasks_released = false;  // lost, and its tasks requeued (scheduler/node_lease.cc)
};

struct Watcher {
  int64_t job_id = 0;
  Core::WatchFn fn;
};

struct Core::State {
  SchedulerOptions options;
  Clock* clock = nullptr;
  Store* store = nullptr;
  AgentGateway* agents = nullptr;
  Executor executor;
  SchedulerMetrics* metrics = nullptr;
  // Every Core handler asserts it runs on one thread (debug builds): the loop's, in the daemon.
  ThreadChecker thread;
  Dispatcher dispatcher;  // StartTask / StopTask commands (MPS policy included)

  int64_t epoch = 0;
  int64_t max_job_id = 0;
  bool schedule_posted = false;
  // A pass that only new submissions asked for looks at those tasks alone: nothing was freed
  // for the older pending ones since the last pass, so asking again could only fail again, and
  // a deep queue would make every submission cost a walk of the whole queue. Every other event
  // (a release, a node, a quota, a reservation, the periodic tick) asks for a full pass.
  bool full_pass_needed = true;
  // The periodic tick re-runs a full pass for what only time changes (minimum runtimes ending,
  // disruption windows sliding, "why pending" reasons). With a deep backlog such a pass is
  // costly, so the tick skips it until fifty times the last full pass's cost has gone by: at most
  // a fiftieth of the core's time goes to periodic passes. Events that free room still ask for a
  // full pass at once. Real time (steady clock), not the injected one: it measures CPU spent.
  std::chrono::steady_clock::time_point last_full_pass_end;
  std::chrono::steady_clock::duration last_full_pass_cost{};
  bool PeriodicPassDue() const;
  void RecordPassCost(bool full, std::chrono::steady_clock::time_point started);
  // One placement of a pass, once its batch was stored (started) or refused (queued again).
  void ActOnPlaced(Core* core, const Status& stored, const PassState::Placed& placed);
  JobTable jobs;
  int64_t retention_cursor = 0;  // EvictFinished resumes after this job id
  std::map<std::string, PoolEntry> pools;
  std::map<std::string, NodeEntry> nodes;
  DeviceSampleBook samples;           // the agents' last device samples, for the API
  TaskQueue queue;                    // the pending tasks
  std::unique_ptr<QueueOrder> order;  // how a pass merges the queues of one priority level
  std::map<std::string, std::set<TaskKey>> active;  // pool → tasks charged to quotas
  TenantBook book;
  DeviceFaultBook faults;  // devices out of service until an admin clears them
  DeviceSlotsBook slots;   // time-slice slots an admin set per device (core_device_slots.cc)
  MigLayoutBook mig;       // MIG layouts asked of GPUs (core_mig_layouts.cc)
  // The last full pass's MIG tasks without room: pool → profile → tasks.
  std::map<std::string, std::map<std::string, int32_t>> mig_waiting;
  ReservationBook reservations;
  StarvationBook starvation;  // nodes drained for starving tasks (core_starvation.cc)
  ImageLocality images;       // which nodes hold which images' layers (advisory, in memory only)
  std::map<std::string, std::deque<int64_t>> disruptions;  // share group → preemption times
  std::map<int64_t, Watcher> watchers;
  std::multimap<int64_t, int64_t> watchers_by_job;
  int64_t next_watch_id = 1;
  size_t running = 0;
  // The change path's retries (core_change.cc). Changes the store refused wait here, in order,
  // and Tick stores them again until it takes them: a finished task is never forgotten because
  // PostgreSQL was down when it ended. Records whose plain update was refused are marked dirty
  // and written again from memory.
  std::deque<ChangeSet> unstored;
  bool retry_in_flight = false;
  std::set<TaskKey> dirty_tasks;
  std::set<int64_t> dirty_jobs;
  std::set<std::string> dirty_nodes;
  std::vector<EventRecord> unstored_events;
  // The usage ledger's marks (core_metering.cc).
  UsageMeter meter;

  // Persists a batch; `then` runs on the core's thread with the outcome.
  void Persist(std::vector<Mutation> batch, std::function<void(Status)> then);
  // Persists a batch whose records memory already holds; if the store refuses it, the records
  // are written again from memory by Tick until it takes them (never dropped).
  void PersistOrRetry(std::vector<Mutation> batch);
  void MarkDirty(const std::vector<Mutation>& batch);

  // The change path for task transitions (core_change.cc).
  TaskChange PlanFinish(const JobEntry& job, int32_t index, TaskState state, std::string reason,
                        int32_t exit_code) const;
  TaskChange PlanRequeueOrFail(const JobEntry& job, int32_t index, const std::string& why) const;
  TaskChange PlanRequeuePreempted(const JobEntry& job, int32_t index) const;
  TaskChange PlanRequeue(const JobEntry& job, int32_t index, const std::string& why,
                         std::string transition) const;
  // Stores the changes (with `extra` mutations), then applies them. REQUIRES: no task of
  // `changes` has a change in flight (TaskRuntime::changing).
  void CommitTaskChanges(Core* core, std::vector<TaskChange> changes,
                         std::vector<Mutation> extra = {});
  void StoreChangeSet(Core* core, ChangeSet set, bool retry);
  void ApplyChangeSet(Core* core, const ChangeSet& set);
  void ApplyTaskChange(const TaskChange& c, std::vector<TaskChange>* follow_up);
  // The usage ledger (core_metering.cc): an attempt's per-second rates as a ledger row; its
  // last intervals appended to the batch of the change that ends it; the marks moved (and the
  // /metrics counters fed) once a batch holding intervals is durable; the periodic close.
  UsageInterval MeterRatesOf(const JobEntry& job, const TaskRecord& t) const;
  void AppendFinalUsage(const TaskChange& c, int64_t now_us, std::vector<Mutation>* batch) const;
  void MeterStored(const std::vector<Mutation>& batch);
  void MeterTick(Core* core);
  // Tick: stores again what the store refused, oldest first.
  void RetryUnstored(Core* core);
  // Posts one scheduling pass (coalesced).
  void RequestSchedule(Core* core, bool full = true);
  // An event now; `tenant` is the job's for job and task events, "" for the cluster's own.
  EventRecord Event(std::string kind, std::string subject, std::string message,
                    std::string tenant = "") const;

  PoolEntry* FindPool(const std::string& name);
  // UpdatePool's steps (core_inventory.cc).
  Result<std::unique_ptr<placement::Engine>> ReplayedEngine(const PoolRecord& pool,
                                                            const PoolEntry& cur);
  void SwapEngine(PoolEntry& e, const PoolRecord& pool, std::unique_ptr<placement::Engine> engine);

  // Recovery (core_recover.cc).
  Status RecoverInventory(const RecoveredState& state);
  JobEntry& RecoverJob(const JobRecord& j);
  std::optional<TaskChange> ReadoptTask(JobEntry& job, int32_t index);

  // Cancel (core_cancel.cc).
  bool CancelPrecondition(const JobEntry* job, int64_t id,
                          const Core::Callback<JobRecord>& done) const;
  CancelPlan PlanCancel(const JobEntry& job, const std::string& reason) const;
  void ApplyCancelToTasks(JobEntry& job, const CancelPlan& plan, std::vector<int32_t>* stop,
                          std::vector<TaskChange>* late);

  // Agents (core_agents.cc): registration's steps, a task's RUNNING and its end.
  Status PrepareRegistration(NodeRecord& n) const;
  // Dynamic MIG (core_mig_layouts.cc).
  const GpuModel* MigModel(const DeviceRecord& gpu) const;
  int32_t BusyMigInstances(const PoolEntry& pool, const NodeEntry& node,
                           const std::string& gpu) const;
  // Each device of `node` healthy in the engine unless its agent, a fault or a re-layout says not.
  void ApplyDeviceHealth(PoolEntry& pool, const NodeEntry& node);
  void StoreMigLayouts(Core* core, std::vector<MigLayoutRecord> rows,
                       std::vector<MigLayoutRecord> ask, std::function<void(Status)> then);
  Status ForgetNodeRoom(PoolEntry& pool, const std::string& name);
  void RecommitTasks(Core* core, PoolEntry& pool, const std::string& name);
  void MarkRunning(JobEntry& job, int32_t index, const std::string& task_id,
                   const std::vector<TaskEndpoint>& endpoints = {});
  TaskChange PlanEnd(const JobEntry& job, int32_t index, const TaskReport& r) const;

  // Node states (core_nodes.cc): a drain planned, the stored change applied.
  struct NodeStateChange {
    std::string name;
    NodeState state;
    NodeState before;                  // the node's state when the change was planned
    std::vector<TaskRecord> draining;  // a drain's planned stop intents
  };
  std::vector<TaskRecord> PlanDrain(const std::string& name, std::vector<Mutation>* batch) const;
  void ApplyDrain(const std::string& name, const std::vector<TaskRecord>& draining);
  // A gang fails together (node_lease.cc): for every gang among `lost`, its other members that
  // still hold room are stopped for requeue (stop intent DRAIN, stored before StopTask goes
  // out) and the gang is placed again only whole.
  void StopGangSiblings(const std::vector<TaskChange>& lost);
  // A released node (lease lapsed, or fenced): plans the requeue of every task it holds, once
  // (NodeEntry::tasks_released), into `lost`; returns how many. CommitNodeRelease stops their
  // gangs' siblings and stores the requeues.
  int PlanNodeRelease(NodeEntry& node, const std::string& why, std::vector<TaskChange>* lost);
  void CommitNodeRelease(Core* core, std::vector<TaskChange> lost);
  void ApplyNodeState(Core* core, const NodeStateChange& change, const Status& st,
                      const Core::Callback<NodeView>& done);

  // Resolves priority class and SKU and checks pool, access and size. Fills entry fields.
  Status Admit(const JobSpec& spec, int32_t* priority, ResourceRequest* request) const;
  // Submission (core.cc): Admit plus the never-fits quota check, counted when refused; the new
  // job's entry; what follows once it is stored.
  Status AdmitSubmission(const JobSpec& spec, int32_t* priority, ResourceRequest* request) const;
  JobEntry NewJob(JobSpec spec, int32_t priority, const ResourceRequest& request);
  void AcceptStored(Core* core, JobEntry entry, const Core::Callback<JobRecord>& done);
  placement::Request ToPlacement(const ResourceRequest& r) const;
  // Rebuilds the engine allocation of a task from its durable record (after restart).
  placement::Allocation AllocationOf(const JobEntry& job, const TaskRecord& task) const;

  // Tenancy (core_tenancy.cc).
  const PriorityClass* ClassOf(const JobEntry& job) const;
  // What one task of the job counts against quotas before it is placed (whole GPUs: devices
  // only, their TFLOPS are known once placed).
  QuotaAmount Estimate(const ResourceRequest& r) const;
  static QuotaAmount UsageOf(const placement::Allocation& a);
  void Charge(JobEntry& job, int32_t index);
  void Uncharge(JobEntry& job, int32_t index);
  // The queue's fair-share key, lower first: its share group's share, then — between tenants
  // of one group — the tenant path's own usage.
  std::pair<double, double> ShareOf(PassState& pass, const FairKey& key);
  void PublishTenantMetrics();

  // Scheduling (core_schedule.cc) and preemption (core_preempt.cc).
  void Reserve(PassState& pass, JobEntry& job, int32_t index, const placement::Allocation& a);
  void RunQueues(PassState& pass);
  void TryPlace(PassState& pass, JobEntry& job, int32_t index);
  void PlaceGang(PassState& pass, JobEntry& job, PoolEntry& pool, const placement::Request& req,
                 const std::string& behind);
  // TryPlace's and PlaceGang's steps (core_schedule.cc).
  void Wait(JobEntry& job, const std::vector<int32_t>& members, const std::string& why,
            const PendingVerdict& verdict);
  bool WaitOverQuota(JobEntry& job, const std::vector<int32_t>& members, const QuotaAmount& amount);
  bool WaitsForVictims(JobEntry& job, int32_t index);
  // Back-off after preemption (core_backoff.cc): set when a preempted task is requeued; true
  // (and the task says until when) while it lasts.
  void StartBackoff(JobEntry& job, int32_t index);
  bool BacksOff(const PassState& pass, JobEntry& job, int32_t index) const;
  void KeepPlacement(PassState& pass, JobEntry& job, int32_t index, PoolEntry& pool,
                     const placement::Allocation& a, const std::string& behind);
  void PreemptOrWait(PassState& pass, JobEntry& job, int32_t index, const placement::Request& req);
  void GangDoesNotFit(PassState& pass, JobEntry& job, const std::vector<int32_t>& members,
                      const placement::Request& req, const placement::Engine::GangResult& g,
                      const std::string& behind);
  void CommitGang(PassState& pass, JobEntry& job, PoolEntry& pool,
                  const std::vector<int32_t>& members,
                  const std::vector<placement::Allocation>& allocations);
  void ProcessReservations(PassState& pass);
  // Starvation reservations (core_starvation.cc). Place / PlaceGang for `job` around the nodes
  // reserved for other starving tasks; when only such a node would take it, `held` says which
  // reservation holds it back.
  placement::Decision PlaceAround(PoolEntry& pool, const JobEntry& job, int32_t index,
                                  const placement::Request& req, std::string* held);
  placement::Engine::GangResult PlaceGangAround(PoolEntry& pool, const JobEntry& job,
                                                const std::vector<placement::Request>& reqs,
                                                std::string* held);
  // Task `index` of `job` (for a gang, the gang) found no room in this pass: a candidate; if it
  // holds a reservation, its reason says which nodes drain for it.
  void NoteStarving(PassState& pass, JobEntry& job, int32_t index);
  // True when task `index` of `job` (its gang) holds a starvation reservation: the pass's memo
  // of failed shapes does not apply to it (it may use nodes the others may not).
  bool ReservesForStarving(const JobEntry& job, int32_t index) const;
  // Drops the reservations that no longer stand; after a full pass, reserves nodes for the
  // candidates that waited longest, up to the cap per pool.
  void ProcessStarvation(PassState& pass, bool full);
  // Its steps.
  std::string StaleStarvation(const StarvationReservation& r, int64_t now) const;
  int64_t WaitingSince(const JobEntry& job, int32_t index, const StarvingKey& key);
  bool ReserveForStarving(PassState& pass, JobEntry& job, int32_t index, const StarvingKey& key,
                          int64_t since);
  void PublishStarvationMetrics();
  // What one task of `job` asks for in milli-GPU (whole GPUs 1000 each; a fractional request its
  // larger share of the pool's largest device; MIG and CPU-only 1), and a placement of it (the
  // hook in Reserve): how the book tells a task passed over for its size from a queued one.
  int64_t SizeMilli(const JobEntry& job) const;
  void NotePlaced(const PassState& pass, const JobEntry& job);
  // Its steps and RebuildReservations' (core_reservations.cc).
  std::string StaleReservation(int64_t id, const Reservation& r, int64_t now) const;
  void TakeUpReservation(PassState& pass, int64_t id);
  void RebuildReservation(int64_t now, JobEntry& job, int32_t index,
                          const std::vector<TaskKey>& victims);
  void DropReservation(int64_t id, const std::string& why);
  // After recovery (or a pool's new engine): gives preemptors whose victims are still stopping
  // their reservation back, from the victims' typed columns; only in `pool` when given.
  void RebuildReservations(int64_t now, const std::string* pool = nullptr);
  // Stops the cheapest victims for a task that does not fit; true when it did.
  // Every running task of `pool` as a candidate, and each share group's standing
  // (core_reclaim.cc).
  std::vector<PreemptionCandidate> Candidates(const std::string& pool, int64_t now,
                                              std::map<std::string, GroupStanding>* groups);
  // True when every group that loses a task to reclaim among `ids` (gangs whole) stays at or
  // above its guarantee (core_reclaim.cc).
  bool ReclaimSparesGroups(PassState& pass, const JobEntry& job, const PreemptorRules& rules,
                           const std::vector<std::string>& ids,
                           const std::map<std::string, const PreemptionCandidate*>& by_id);
  // What a victim's stop takes from its group: its usage, or its whole gang's.
  QuotaAmount LostWith(const JobEntry& victim, int32_t index) const;
  // Candidates(pool, pass.now), computed again only once the pass placed or stopped something.
  const std::vector<PreemptionCandidate>& PassCandidates(PassState& pass, const std::string& pool);
  // What a task of `job` counts against its group's guarantee when deciding on reclaim.
  QuotaAmount ReclaimNeed(const JobEntry& job) const;
  int32_t BudgetLeft(int64_t now, const std::string& group);
  // The candidates `job` may preempt under `rules`, priorities doubled for FindVictims.
  std::vector<PreemptionCandidate> Eligible(PassState& pass, const JobEntry& job,
                                            const PreemptorRules& rules, bool* budget_blocked);
  // Stops `ids` (and their gangs) for task `index` of `job`; the ones in `ids` feed `rid`.
  void StopVictims(PassState& pass, JobEntry& job, int32_t index, const PreemptorRules& rules,
                   int64_t rid, const std::vector<std::string>& ids,
                   const std::map<std::string, const PreemptionCandidate*>& by_id);
  // Why the disruption budget forbids stopping `ids` (gangs whole) now, or "".
  std::string OverBudget(int64_t now, const std::vector<std::string>& ids,
                         const std::map<std::string, const PreemptionCandidate*>& by_id);
  int64_t NewReservation(PassState& pass, JobEntry& job, int32_t index,
                         const placement::VictimSet& vs, bool gang);
  // True when every reservation on `node` still fits once its victims are gone, given what the
  // engine holds now (callers commit a tentative placement first). Changes nothing.
  bool ReservationsFit(PoolEntry& pool, const std::string& node);
  // A reservation filed with its quota held (TenantBook::Hold), and erased with it released.
  int64_t AddReservation(Reservation r);
  void EraseReservation(int64_t id);
  // What a preemption may promise (core_preempt_room.cc): the pool as it will be once every
  // reservation of `pool` is taken up (tentative steps in `tx`); whether `allocations` fit now
  // with only `victims` gone; why the preemptor's chain would be over a limit with `need` once
  // its victims are gone, or "".
  void ReservedFuture(placement::Tentative& tx, const std::string& pool);
  bool RoomNowWithout(PoolEntry& pool, const std::vector<std::string>& victims,
                      const std::map<std::string, const PreemptionCandidate*>& by_id,
                      const std::vector<placement::Allocation>& allocations);
  std::string PreemptorOverLimit(const JobEntry& job, const QuotaAmount& need,
                                 const std::vector<std::string>& victims,
                                 const std::map<std::string, const PreemptionCandidate*>& by_id,
                                 std::string* binding) const;
  bool OverLimitOnceRoomIsFree(JobEntry& job, const std::vector<int32_t>& members,
                               const QuotaAmount& usage, const std::vector<std::string>& victims,
                               const std::map<std::string, const PreemptionCandidate*>& by_id);
  // Sends the pass's victim stops once its batch is stored, or undoes them if it was refused.
  void ActOnStops(const Status& stored, const std::vector<PassState::Stop>& stops,
                  const std::vector<int64_t>& new_reservations);
  bool TryPreemptGang(PassState& pass, JobEntry& job, const std::vector<int32_t>& members,
                      const placement::Request& req, std::string* why);
  // One round of TryPreempt / TryPreemptGang (core_preempt.cc): kWaits when victims were found
  // but the task waits over a limit (no further round).
  enum class Preempted { kNo, kYes, kWaits };
  // Runs `round` once, or twice for reclaim (the second with any_class set), until it says
  // kYes (true) or kWaits (false).
  static bool InRounds(PreemptorRules& rules, const std::function<Preempted()>& round);
  static bool SkipRound(PassState& pass, const JobEntry& job, const PreemptorRules& rules,
                        const std::pair<ShapeKey, std::string>& memo,
                        const std::vector<PreemptionCandidate>& candidates);
  Preempted PreemptRound(PassState& pass, PoolEntry& pool, JobEntry& job, int32_t index,
                         const placement::Request& req, const PreemptorRules& rules,
                         std::string* why);
  Preempted PreemptGangRound(PassState& pass, PoolEntry& pool, JobEntry& job,
                             const std::vector<int32_t>& members, const placement::Request& req,
                             const PreemptorRules& rules, std::string* why);
  bool TryPreempt(PassState& pass, JobEntry& job, int32_t index, const placement::Request& req,
                  std::string* why);
  // Their steps (core_preempt.cc).
  PreemptionCandidate CandidateOf(const std::string& pool, const TaskKey& key, int64_t now,
                                  bool* eligible) const;
  bool RulesFor(const JobEntry& job, const QuotaAmount& need, PreemptorRules* rules) const;
  static std::pair<ShapeKey, std::string> PreemptMemo(const JobEntry& job,
                                                      const PreemptorRules& rules,
                                                      const std::string& suffix);
  bool VictimsAllowed(PassState& pass, const std::pair<ShapeKey, std::string>& memo, bool found,
                      const std::vector<std::string>& ids, bool budget_blocked,
                      const std::map<std::string, const PreemptionCandidate*>& by_id,
                      std::string* why);
  bool GangVictims(PoolEntry& pool, const placement::Request& req, int32_t priority, size_t count,
                   const std::vector<PreemptionCandidate>& candidates,
                   const std::map<std::string, const PreemptionCandidate*>& by_id,
                   std::vector<placement::VictimSet>* sets, std::set<std::string>* chosen);
  std::string PreemptionText(const JobEntry& job, int32_t index, const PreemptorRules& rules,
                             const JobEntry& victim, const PreemptionCandidate& c,
                             bool priority_rule) const;
  static std::vector<int32_t> StoppingWith(JobEntry& victim, int32_t index);
  // One victim task's planned stop: which task, for which candidate, by which rule, feeding
  // which reservation, with what text.
  struct VictimStop {
    JobEntry* victim = nullptr;
    const PreemptionCandidate* c = nullptr;
    int32_t m = 0;
    bool priority_rule = false;
    int64_t rid = 0;
    bool restarting_before = false;
    std::string text;
  };
  void PlanVictimStop(PassState& pass, const JobEntry& job, int32_t index, const VictimStop& v);

  // True when the job and every task of it have ended, it finished before `cutoff_us`, and
  // nothing refers to it any more: the daemon may forget it.
  static bool Forgettable(const JobEntry& job, int64_t cutoff_us);
  // Forgets up to `budget` finished jobs past the retention, resuming where the last call
  // stopped, so each tick costs a bounded slice of the job table.
  void EvictFinished(int64_t now_us, int budget);

  void ReleaseTask(JobEntry& job, int32_t index);
  // Recomputes the job's state from its tasks; returns true when it changed.
  bool RefreshJobState(JobEntry& job);
  void Notify(const JobEntry& job, const std::string& message);
  void RecomputeLimits(PoolEntry& pool);
  CapacityView PoolCapacity(const PoolEntry& pool) const;
  NodeView ViewOf(const NodeEntry& node) const;
  int32_t RetryLimit(const JobEntry& job) const;
};

}  // namespace gpupool
