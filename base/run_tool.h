// RunTool: runs one external program (skopeo, umoci, runc, ip, a fencing command) to completion
// and captures its output.
//
// The child gets stdin from /dev/null, stdout and stderr on pipes the caller reads back, and a
// fresh environment (only what `env` lists, plus PATH). Descriptors of the caller never leak: every
// descriptor the agent and gpupoold open is close-on-exec, and `pass_fd` (a memfd holding a
// registry credential, say) is the only one handed on, always as descriptor 3, so the tool can be
// told
// "/proc/self/fd/3" — a secret that way never touches a disk or a command line.
//
// A tool that outlives `timeout_ms` is SIGKILLed with every process it started (it runs in a
// process group of its own) and the result says so.
//
// Thread safety: RunTool may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct ToolRun {
  std::vector<std::string> argv;  // argv[0] is the program: absolute, or looked up in PATH
  std::vector<std::string> env;   // "K=V"; PATH is added when absent
  int pass_fd = -1;               // handed to the child as fd 3 when >= 0
  int64_t timeout_ms = 0;         // 0 = none
  int stdout_fd = -1;             // when >= 0, stdout goes there instead of being captured
};

struct ToolResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string out;  // stdout (empty when redirected)
  std::string err;  // stderr
  bool ok() const { return exit_code == 0; }
  // "exit 1: <last line of stderr>" — for error messages.
  std::string Describe() const;
};

// Errors only when the program could not be started (NotFound names it).
Result<ToolResult> RunTool(const ToolRun& run);

// A memfd (close-on-exec) holding `content`, positioned at 0; -1 with the error on failure.
Result<int> SecretFd(const std::string& name, const std::string& content);

}  // namespace gpupool
