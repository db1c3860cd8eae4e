// gpupoolctl: the command gpupool's users type. A thin front that starts in about a millisecond:
// when the user runs a session helper (`gpupoolctl session start`, cmd/ctl/session.cc) it hands
// the invocation over the helper's Unix socket and prints what comes back; otherwise — no
// helper, GPUPOOL_SESSION=off, or a command the helper does not serve — it runs the full CLI,
// gpupoolctl-full beside it, with the same arguments. Links only the standard library and
// session_wire/process_env, which is the point: the full CLI spends ~30 ms starting gRPC and
// OpenSSL before it sends a byte (docs/benchmarks.md, "CLI latency").
//
// Never twice: once a request has reached the helper, a lost reply is an error (exit 5), not a
// reason to run the command again directly — a `jobs submit` must not become two jobs.
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cmd/ctl/process_env.h"
#include "cmd/ctl/session_wire.h"

namespace {

namespace session = gpupool::ctl::session;

constexpr size_t kMaxReplyBytes = size_t{256} << 20;
constexpr int kExitUnavailable = 5;  // cmd/ctl/app.h

void WriteOut(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Runs the invocation through the session helper. nullopt: nothing reached it, or it does not
// serve this command — run it directly. Otherwise the exit code (output already written).
std::optional<int> ThroughSession(const std::vector<std::string>& args) {
  const char* mode = std::getenv("GPUPOOL_SESSION");
  if (args.empty() || (mode != nullptr && std::strcmp(mode, "off") == 0)) return std::nullopt;
  std::string why;
  const int fd = session::ConnectToSession(&why);
  if (fd < 0) return std::nullopt;
  const gpupool::ctl::ProcessEnv env = gpupool::ctl::ReadProcessEnv();
  session::Request req;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) {
    ::close(fd);
    return std::nullopt;
  }
  req.cwd = cwd;
  req.server = env.server, req.token = env.token, req.ca = env.ca;
  req.config_path = env.config_path;
  req.args = args;
  // The helper acts only on a whole frame, so a failed write means it ran nothing.
  if (!session::WriteAll(fd, session::EncodeRequest(req))) {
    ::close(fd);
    return std::nullopt;
  }
  const std::optional<std::string> frame = session::ReadFrame(fd, kMaxReplyBytes);
  ::close(fd);
  const std::optional<session::Reply> reply = frame ? session::DecodeReply(*frame) : std::nullopt;
  if (!reply) {
    WriteOut(2,
             "gpupoolctl: UNAVAILABLE: the session helper took the command and did not answer; "
             "it may or may not have run (check before retrying; GPUPOOL_SESSION=off bypasses "
             "the helper)\n");
    return kExitUnavailable;
  }
  if (!reply->served) return std::nullopt;
  WriteOut(1, reply->out);
  WriteOut(2, reply->err);
  return reply->exit_code;
}

// The full CLI: gpupoolctl-full in this binary's directory.
std::string FullCli() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "gpupoolctl-full";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "gpupoolctl-full";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (const std::optional<int> code = ThroughSession(args)) return *code;
  const std::string full = FullCli();
  ::execv(full.c_str(), argv);
  WriteOut(2, "gpupoolctl: cannot run " + full + ": " + std::strerror(errno) + "\n");
  return 1;
}
