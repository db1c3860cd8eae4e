// WriteControlFile: one write of a short value to a kernel control file (cgroup files, sysctls
// under /proc/sys), as the kernel takes them: a single write(2), not a buffered stream, so the
// kernel's refusal (EINVAL, EBUSY…) comes back as the error.
//
// Thread safety: safe from any thread.
#pragma once

#include <string>

#include "base/status.h"

namespace gpupool {

// INTERNAL naming the file, the value and the errno when it cannot be opened or written whole.
Status WriteControlFile(const std::string& path, const std::string& value);

}  // namespace gpupool
