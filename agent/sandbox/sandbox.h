// Sandbox: the node's confinement settings — who a task runs as (the uid pool, tenant users),
// which cgroup hierarchies the node has, what the tasks must not see — shared by every task the
// OCI runtime confines (agent/oci/container.h). One sandbox path (issue 25): the runtime builds
// each task's namespaces, cgroups, device rules and seccomp filter from the spec the agent
// writes; this object holds what the specs are written from.
//
// The agent makes one Sandbox at start (Create checks that it can: root, a uid pool, the hidden
// paths exist). Capabilities() says, for Register, what this node can and cannot enforce; where
// the node cannot run containers, nothing is enforced and every task fails rather than run
// unconfined (TaskRunner).
//
// Thread safety: Sandbox is immutable after Create and safe from any thread (UidMap locks).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/sandbox/cgroup.h"
#include "agent/sandbox/uids.h"
#include "base/status.h"

namespace gpupool::agent::sandbox {

struct SandboxOptions {
  bool enabled = false;
  // Containers' groups are <controller mount>/<this>-containers/<task>.
  std::string cgroup_parent = "gpupool";
  int64_t uid_pool_first = 0;
  int64_t uid_pool_count = 0;
  std::map<std::string, std::string> tenant_users;  // tenant → user name or "#uid"
  int64_t pids_max = 4096;
  int64_t default_memory_mib = 0;       // for a task whose request names no host memory; 0 = none
  std::vector<std::string> hide_paths;  // files or directories tasks must not see
  // What of the host a plain command sees (docs/sandbox.md, "Plain commands"): these
  // directories, read-only; nothing else of the host.
  std::vector<std::string> host_dirs = {"/usr", "/etc", "/opt"};
};

// One thing a node can (or cannot) enforce, as reported at registration.
struct Capability {
  std::string name;  // sandbox, memory, cpu, pids, devices, uid, namespaces (agent/capabilities.h
                     // adds mps, vram_scrub, xid_events)
  bool enforced = false;
  std::string detail;
};

class Sandbox {
 public:
  // REQUIRES: options.enabled.
  static Result<std::shared_ptr<Sandbox>> Create(SandboxOptions options);
  // Capabilities of an agent without a sandbox (sandbox.enabled: false).
  static std::vector<Capability> DisabledCapabilities();
  // Removes the (then empty) <cgroup_parent>-containers directories; busy ones are left alone.
  ~Sandbox();

  // What the node enforces on every task when `runtime` (the OCI runtime's path) confines them;
  // with `runtime` empty nothing is enforced, and `why` says why.
  std::vector<Capability> Capabilities(const std::string& runtime, const std::string& why) const;
  const CgroupLayout& layout() const { return layout_; }
  const SandboxOptions& options() const { return options_; }
  // The node's one map of task uids: every container takes its ids from it, so no two tasks
  // ever share a uid.
  const std::shared_ptr<UidMap>& uids() const { return uids_; }

 private:
  explicit Sandbox(SandboxOptions options);

  SandboxOptions options_;
  CgroupLayout layout_;
  std::shared_ptr<UidMap> uids_;
};

}  // namespace gpupool::agent::sandbox
