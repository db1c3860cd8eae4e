// `gpupoolctl session start|serve|stop|status`: a per-user helper that keeps gRPC, OpenSSL and
// the TLS connections to gpupoold up between commands, so a script's `gpupoolctl jobs submit` in a
// loop costs a local round trip plus the RPC instead of starting a TLS stack every time.
//
// The thin front (cmd/gpupoolctl.cc) sends each invocation here over a Unix socket
// (session_wire.h: only the same user gets through); the helper runs it with the very Run() the
// full CLI uses — same flags, same settings file, same output and exit codes — and sends the
// output back. It serves only one-shot commands (kServed); anything that streams, prompts, reads
// stdin or manages the session itself is answered "not served" and the front runs the full CLI
// as before. One request at a time: a command's relative paths are read from the caller's
// working directory, which the helper enters for the request. It exits after --idle without a
// request (default 30m), on `session stop`, or on SIGTERM.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>  // sockaddr_un, for the listener
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cmd/ctl/app.h"
#include "cmd/ctl/session_wire.h"
#include "cmd/ctl/units.h"

namespace gpupool::ctl {
namespace {

// The commands a session runs: one request, one reply, no stdin, no terminal.
constexpr const char* kServed[] = {"jobs submit", "jobs get",  "jobs list", "jobs cancel",
                                   "nodes list",  "nodes get", "pools list"};
constexpr size_t kMaxRequestBytes = 4 << 20;
constexpr int64_t kDefaultIdleMs = 30 * 60 * 1000;

bool Servable(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "-" || a == "-w" || a == "--watch") return false;  // stdin, or a watch that streams
  const std::string path = CommandPathOf(args);
  for (const char* p : kServed)
    if (path == p) return true;
  return false;
}

// Sends the helper a control request ("session stop" / "session status") and returns its reply.
std::optional<session::Reply> Control(const std::string& verb, std::string* why) {
  const int fd = session::ConnectToSession(why);
  if (fd < 0) return std::nullopt;
  session::Request req;
  req.args = {"session", verb};
  std::optional<std::string> frame;
  if (session::WriteAll(fd, session::EncodeRequest(req)))
    frame = session::ReadFrame(fd, kMaxRequestBytes);
  ::close(fd);
  std::optional<session::Reply> reply = frame ? session::DecodeReply(*frame) : std::nullopt;
  if (!reply) *why = "the session helper did not answer";
  return reply;
}

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Helper {
  std::string socket_path;
  int64_t idle_ms = kDefaultIdleMs;
  ChannelCache channels;
  int64_t served = 0;
  bool unlinked = false;  // the socket is gone already (stopped): never unlink a successor's
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // Runs one request; `stop` set for "session stop".
  session::Reply Handle(const session::Request& req, bool* stop) {
    session::Reply reply;
    if (req.args == std::vector<std::string>{"session", "stop"}) {
      *stop = true;
      // Gone before the reply: whoever reads "stopped" finds no socket, and a helper started
      // right after binds its own, which this one must then not remove on its way out.
      ::unlink(socket_path.c_str());
      unlinked = true;
      reply.served = true;
      reply.out = "gpupoolctl: session stopped (" + socket_path + ")\n";
      return reply;
    }
    if (req.args == std::vector<std::string>{"session", "status"}) {
      const auto up = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - started)
                          .count();
      reply.served = true;
      reply.out = "session: running, pid " + std::to_string(::getpid()) + ", socket " +
                  socket_path + "\nup " + FormatDurationMs(up) + ", " + std::to_string(served) +
                  " commands served, " + std::to_string(channels.size()) +
                  " connections kept, exits after " + FormatDurationMs(idle_ms) + " idle\n";
      return reply;
    }
    if (!Servable(req.args) || req.cwd.empty() || ::chdir(req.cwd.c_str()) != 0) return reply;
    Environment env;
    env.server = req.server, env.token = req.token, env.ca = req.ca;
    env.config_path = req.config_path;
    env.channels = &channels;
    std::ostringstream out, err;
    reply.exit_code = Run(req.args, env, out, err);
    reply.served = true;
    reply.out = out.str();
    reply.err = err.str();
    ++served;
    return reply;
  }

  int Loop(int listener) {
    while (!g_stop) {
      pollfd p{listener, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(idle_ms, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;  // idle for idle_ms, or poll failed: exit
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      bool stop = false;
      if (session::PeerUid(fd) == static_cast<long>(::getuid())) {
        timeval tv{5, 0};  // a client that connects and sends nothing does not hold the helper
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::optional<std::string> frame = session::ReadFrame(fd, kMaxRequestBytes);
        std::optional<session::Request> req = frame ? session::DecodeRequest(*frame) : std::nullopt;
        if (req) session::WriteAll(fd, session::EncodeReply(Handle(*req, &stop)));
      }
      ::close(fd);
      if (stop) break;
    }
    return kExitOk;
  }
};

int Serve(Ctx& ctx, const ParsedArgs& a) {
  int64_t idle_ms = kDefaultIdleMs;
  if (a.Has("idle")) {
    Result<int64_t> ms = ParseDurationMs(a.Get("idle"));
    if (!ms.ok() || *ms <= 0) return ctx.Usage("--idle: want a positive duration such as 30m");
    idle_ms = *ms;
  }
  std::string why;
  if (Control("status", &why)) {
    ctx.err << "gpupoolctl: a session is already running (gpupoolctl session status)\n";
    return kExitAlreadyExists;
  }
  const std::string dir = session::SessionDir(::getuid(), /*create=*/true, &why);
  if (dir.empty()) return ctx.Fail(Status::FailedPrecondition(why), kExitError);
  Helper h;
  h.idle_ms = idle_ms;
  h.socket_path = session::SocketPath(dir);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (h.socket_path.size() >= sizeof addr.sun_path)
    return ctx.Fail(Status::FailedPrecondition(h.socket_path + ": path too long"), kExitError);
  std::memcpy(addr.sun_path, h.socket_path.c_str(), h.socket_path.size() + 1);
  ::unlink(h.socket_path.c_str());  // a dead helper's socket (none answered above)
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const mode_t old_mask = ::umask(0177);  // the socket 0600 from the start
  const bool bound =
      listener >= 0 && ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::umask(old_mask);
  if (!bound || ::listen(listener, 128) != 0) {
    const std::string e = std::strerror(errno);
    if (listener >= 0) ::close(listener);
    return ctx.Fail(Status::FailedPrecondition(h.socket_path + ": " + e), kExitError);
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const int code = h.Loop(listener);
  ::close(listener);
  if (!h.unlinked) ::unlink(h.socket_path.c_str());
  return code;
}

// Starts `session serve` in the background, detached, and waits for it to answer.
int Start(Ctx& ctx, const ParsedArgs& a) {
  std::string why;
  if (std::optional<session::Reply> r = Control("status", &why)) {
    ctx.out << r->out;
    return kExitOk;
  }
  if (session::SessionDir(::getuid(), /*create=*/true, &why).empty())
    return ctx.Fail(Status::FailedPrecondition(why), kExitError);
  std::vector<std::string> args = {"gpupoolctl", "session", "serve"};
  if (a.Has("idle")) args.insert(args.end(), {"--idle", a.Get("idle")});
  const pid_t pid = ::fork();
  if (pid < 0) return ctx.Fail(Status::Internal(std::strerror(errno)), kExitError);
  if (pid == 0) {
    ::setsid();
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
      if (null > 2) ::close(null);
    }
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 100; ++i) {  // up to 5 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::optional<session::Reply> r = Control("status", &why)) {
      ctx.out << r->out;
      return kExitOk;
    }
  }
  return ctx.Fail(Status::Unavailable("the session helper did not start: " + why),
                  kExitUnavailable);
}

// `session stop` / `session status`: the helper's answer, or NOT_FOUND when none runs.
int AskHelper(Ctx& ctx, const std::string& verb) {
  std::string why;
  std::optional<session::Reply> r = Control(verb, &why);
  if (!r) return ctx.Fail(Status::NotFound(why), kExitNotFound);
  ctx.out << r->out;
  return kExitOk;
}
int Stop(Ctx& ctx, const ParsedArgs&) { return AskHelper(ctx, "stop"); }
int StatusOf(Ctx& ctx, const ParsedArgs&) { return AskHelper(ctx, "status"); }

}  // namespace

std::vector<Command> SessionCommands() {
  const std::string about =
      "A session helper keeps gRPC, OpenSSL and the connections to gpupoold up between\n"
      "commands: while it runs, gpupoolctl hands it jobs submit, get, list and cancel and nodes\n"
      "list/get and pools list, and a call costs a local round trip plus the RPC (about 2 ms\n"
      "against 30 ms for a fresh process; docs/cli.md, \"Sessions\"). Output, exit codes and\n"
      "settings are those of a direct call; other commands run directly as before. Only your\n"
      "user can reach it (a 0700 directory under $XDG_RUNTIME_DIR, else /tmp/gpupool-UID, and\n"
      "the peer's uid is checked). Set GPUPOOL_SESSION=off to bypass it.";
  const FlagSpec idle = {"idle", 0, FlagKind::kValue, "DURATION",
                         "exit after this long without a command (default 30m)"};
  return {
      {"session start",
       "[--idle DURATION]",
       "Start your session helper in the background",
       about,
       {idle},
       "  gpupoolctl session start\n  gpupoolctl session start --idle 8h\n",
       0,
       0,
       Start},
      {"session serve",
       "[--idle DURATION]",
       "Run the session helper in the foreground (for a service manager)",
       about,
       {idle},
       "  gpupoolctl session serve --idle 24h\n",
       0,
       0,
       Serve},
      {"session stop",
       "",
       "Stop your session helper",
       about,
       {},
       "  gpupoolctl session stop\n",
       0,
       0,
       Stop},
      {"session status",
       "",
       "Show whether your session helper runs, and what it has served",
       about,
       {},
       "  gpupoolctl session status\n",
       0,
       0,
       StatusOf},
  };
}

}  // namespace gpupool::ctl
