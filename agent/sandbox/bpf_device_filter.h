// BpfDeviceFilter: device filtering for cgroup v2, which has no devices controller.
//
// A BPF_PROG_TYPE_CGROUP_DEVICE program is assembled here from raw instructions (no clang/BPF
// toolchain, no libbpf: the bpf(2) system call directly) and attached with BPF_CGROUP_DEVICE to
// a task's v2 cgroup. The kernel runs it on every open/mknod of a device node by a process in
// the group; it allows exactly the rules given — v1 syntax, as the devices controller takes them
// ("c 195:0 rw", "c 136:* rwm"; type c, b or a; minor or major may be *) — and denies anything
// else with EPERM. The program is attached without BPF_F_ALLOW_MULTI, so a task cannot add its
// own; it is detached with the cgroup when the group is removed.
//
// The program, for each rule in order:
//   if (type matches && major matches && minor matches && (access & ~allowed) == 0) return 1;
// and `return 0` at the end. `ctx` is struct bpf_cgroup_dev_ctx {access_type = access << 16 |
// type, major, minor}.
//
// Thread safety: free functions, no state.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::agent::sandbox {

// Loads the program for `rules` and attaches it to the cgroup v2 directory `cgroup_dir`. Errors
// name the rule or the failing call (EPERM without CAP_BPF/CAP_SYS_ADMIN, EINVAL where the
// kernel lacks cgroup device programs).
Status AttachDeviceFilter(const std::string& cgroup_dir, const std::vector<std::string>& rules);

// Whether this kernel loads cgroup device programs for us (loads a deny-all program once, then
// closes it); the error says why not.
Status ProbeDeviceFilter();

}  // namespace gpupool::agent::sandbox
