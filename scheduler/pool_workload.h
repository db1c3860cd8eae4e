// The scheduler's hooks into a pool's learned workload (placement/workload_feed.h): what an
// accepted submission teaches it, when its engine is fed, what GetPool shows, and the pool's tie
// order. The feed itself is pure placement code, shared with `gpupool-sim --online`, so the
// daemon places exactly as the sim's online replay does (tests/scheduler/workload_replay_test).
//
// Restart: the model is not persisted. Recovery rebuilds it by observing the retained jobs
// (scheduler.job_retention_ms, 24 h by default) in submission order, i.e. the recent mix; with
// the decay's half-life of 8192 tasks, older jobs would weigh little anyway.
// Thread safety: the core's strand, like the PoolEntry it reads.
#pragma once

#include <cstdint>

#include "placement/placement.h"
#include "scheduler/core.h"

namespace gpupool {

struct PoolEntry;

inline constexpr size_t kShownLearnedClasses = 5;

// The pool's engine configuration beyond its record: the tie order (placement::DaemonTieSeed).
void ConfigureEngine(const PoolRecord& rec, placement::PoolPolicy* policy);
// An accepted (or recovered) job: `tasks` tasks of `request`.
void LearnSubmission(PoolEntry& pool, const placement::Request& request, int32_t tasks);
// Before placing in the pool: gives the engine the model when due.
void FeedEngine(PoolEntry& pool);
LearnedWorkload LearnedOf(const PoolEntry& pool);

}  // namespace gpupool
