// SubmitJob's idempotency key at the edge: checking the key, the digest that tells a retry from
// a different request under the same key, and the answer to a submission whose key already
// names a job. The key is stored with the job (JobSpec::idempotency_key; unique per tenant in the
// store), so a retry after a restart still finds it.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "gpupool/v1/jobs.pb.h"
#include "scheduler/model.h"

namespace gpupool::api {

// OK for 1..128 characters of [A-Za-z0-9._:-]; INVALID_ARGUMENT naming `field` otherwise.
Status ValidateIdempotencyKey(std::string_view key, std::string_view field = "idempotency_key");

// A stable digest of the spec as sent (deterministic serialization, FNV-1a 64, hex).
std::string SpecDigest(const v1::JobSpec& spec);

// The reply to a submission whose key names `prior`: the same job when `digest` matches the
// request it was created by, else ALREADY_EXISTS saying the key was used for another request.
Status ReplayOf(const JobRecord& prior, const std::string& digest, v1::SubmitJobResponse* out);

}  // namespace gpupool::api
