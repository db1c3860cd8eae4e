// Volumes of a task's container, as a tenant declares them (TaskTemplate.volumes) and a node's
// operator offers them (the agent's `datasets:`): the checks both sides share, so a submission is
// refused naming what is wrong instead of failing on every node later.
//
// A volume is mounted at `mount_path` in the container. With a dataset name it is that dataset,
// read-only; without one it is a scratch directory, writable by the task and removed with it.
#pragma once

#include <string>

#include "base/status.h"

namespace gpupool {

inline constexpr int kMaxVolumes = 16;

// An absolute, normalised path ("/data", not "data", "/data/", "/a/../b" or "//x"), at most
// 1024 bytes, not "/" and not at or under /proc, /sys or /dev (the runtime's own mounts).
// InvalidArgument saying why.
Status CheckVolumeMountPath(const std::string& path);

// [a-z0-9][a-z0-9._-]*, at most 63 characters. InvalidArgument saying why.
Status CheckDatasetName(const std::string& name);

}  // namespace gpupool
