// Seccomp: the container engines' default seccomp profile, turned into the OCI runtime spec's
// `linux.seccomp`.
//
// Debian's containers-common ships the profile Podman and CRI-O use by default as
// /usr/share/containers/seccomp.json, in Docker's format: a default action (ERRNO/ENOSYS for
// every system call not listed), an `archMap`, and rules whose `includes`/`excludes` name the
// architectures, capabilities and minimum kernel they apply to. The OCI spec has no such
// conditions, so they are resolved here, for this task: a rule is kept when
//   - includes.arches is empty or contains this node's architecture (Go names: amd64, arm64…),
//     and excludes.arches does not;
//   - every capability in includes.caps is granted to the task, and none in excludes.caps is;
//   - includes.minKernel is empty or not newer than this node's kernel.
// `architectures` is this architecture's native and sub-architectures from archMap. Names,
// actions, errno values and argument filters are copied as they are (they already use the
// spec's vocabulary: SCMP_ACT_*, SCMP_CMP_*).
//
// Errors: NotFound when the profile file is missing (the agent then refuses to start tasks
// rather than run them without a filter), InvalidArgument naming what is malformed.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent::oci {

inline constexpr char kDefaultSeccompProfile[] = "/usr/share/containers/seccomp.json";

struct SeccompTarget {
  std::string arch;                       // Go name: "amd64", "arm64" …
  std::string kernel;                     // "6.1.0"
  std::vector<std::string> capabilities;  // "CAP_CHOWN" … granted to the task
  static SeccompTarget ThisNode(std::vector<std::string> capabilities);
};

Result<nlohmann::json> ConvertSeccompProfile(const std::string& profile_json,
                                             const SeccompTarget& target);
Result<nlohmann::json> LoadSeccompProfile(const std::string& path, const SeccompTarget& target);

}  // namespace gpupool::agent::oci
