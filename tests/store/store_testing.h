// Helpers shared by the store tests: waiting for Apply(), and sample records with every field
// set to something other than its default (quotes, backslashes and non-ASCII text included).
#pragma once

#include <string>
#include <vector>

#include "scheduler/store.h"

namespace gpupool::testing {

// Applies `batch` and waits for its done (at most 60 s).
Status ApplyAndWait(Store& store, std::vector<Mutation> batch);

// Records with every field set to something other than its default.
JobRecord SampleJob(int64_t id, int tasks);
PoolRecord SamplePool(const std::string& name);
NodeRecord SampleNode(const std::string& name, const std::string& pool);

}  // namespace gpupool::testing
