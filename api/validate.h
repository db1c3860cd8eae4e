// validate: syntax and range checks shared by the API edge (api/convert.h) — names, tenant
// paths, ids, page tokens and the limits beyond which a value is absurd.
//
// Every check returns INVALID_ARGUMENT with a message that starts with the field it names,
// e.g. "spec.tenant: segment 2 'Research' must match [a-z0-9][a-z0-9-_.]*".
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "scheduler/model.h"
#include "scheduler/tenancy.h"

namespace gpupool::api {

// ---- Limits checked at the edge (absurd values are rejected before the core sees them). ----
inline constexpr int32_t kMaxTaskCount = 10000;
inline constexpr int64_t kMaxMilliTflopsPerDevice = 100'000'000;     // 100,000 TFLOPS
inline constexpr int64_t kMaxVramMibPerDevice = 16LL * 1024 * 1024;  // 16 TiB
inline constexpr int32_t kMaxWholeGpus = 64;
inline constexpr int64_t kMaxCpuMilli = 4'096'000;                  // 4096 cores
inline constexpr int64_t kMaxHostMemoryMib = 64LL * 1024 * 1024;    // 64 TiB
inline constexpr int64_t kMaxRuntimeMs = 366LL * 24 * 3600 * 1000;  // a year
inline constexpr int32_t kMaxRetries = 100;
inline constexpr int32_t kMaxPageSize = 1000;
inline constexpr int32_t kDefaultPageSize = 100;
inline constexpr double kMinOvercommit = 1.0;
inline constexpr double kMaxOvercommit = 10.0;
inline constexpr int32_t kMinReplicas = 2;
inline constexpr int32_t kMaxReplicas = 64;
inline constexpr size_t kMaxNameLength = 63;

// "field: message" as INVALID_ARGUMENT.
Status Invalid(std::string_view field, std::string_view message);
// INVALID_ARGUMENT "field: must be between lo and hi, got v" unless lo <= v <= hi.
Status CheckRange(int64_t v, int64_t lo, int64_t hi, std::string_view field);
// "spec" + "task_count" → "spec.task_count" (either may be empty).
std::string FieldPath(std::string_view parent, std::string_view child);

// Tenant paths: gpupool::ValidateTenantPath (scheduler/tenancy.h), the one rule for the edge,
// the config file and the core.
// Pool, node, SKU, priority class names: [a-z0-9][a-z0-9-_.]*, ≤ 63 chars.
Status ValidateName(std::string_view name, std::string_view field);
// Tenant-path containment is gpupool::TenantWithin (scheduler/model.h), shared with the core.

// "12" → 12; INVALID_ARGUMENT naming `field` unless a positive integer.
Result<int64_t> JobIdFromString(std::string_view id, std::string_view field = "job_id");
// Validates a task id "<job>.<index>".
Status ValidateTaskId(std::string_view id, std::string_view field = "task_id");

// The opaque page token that resumes after job id `after_id`; "" for 0 (no more pages).
std::string EncodePageToken(int64_t after_id);
// Inverse of EncodePageToken; "" → 0. INVALID_ARGUMENT for anything it did not produce.
Result<int64_t> DecodePageToken(std::string_view token, std::string_view field = "page_token");

}  // namespace gpupool::api
