// The gpupoolctl session's local protocol: what the thin `gpupoolctl` front (cmd/gpupoolctl.cc)
// sends the user's session helper (`gpupoolctl session start`, cmd/ctl/session.cc) over a Unix
// socket, and what comes back. Standard library and POSIX only: the front links nothing else,
// which is why it starts in about a millisecond where the full CLI (gRPC, OpenSSL) takes 30.
//
// A frame is the magic "GPC1", a u32 count and that many strings (u32 length, bytes), all
// little-endian. The request's strings are the working directory, the Environment's four
// fields (server, token, CA path, config path) and the arguments; the reply's are "served" or
// "not served", the exit code, stdout and stderr.
//
// Who may talk to whom: the socket lives in a directory that only its user may enter (0700,
// owned by the user; `SessionDir` refuses anything else), and each side checks the other's uid
// with SO_PEERCRED, so a token is never handed to, or accepted from, another user.
//
// Thread safety: free functions; no shared state.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpupool::ctl::session {

struct Request {
  std::string cwd;
  std::string server, token, ca, config_path;
  std::vector<std::string> args;
};

struct Reply {
  bool served = false;  // false: the helper does not run this command; run it yourself
  int exit_code = 0;
  std::string out, err;
};

std::string EncodeRequest(const Request& r);
std::optional<Request> DecodeRequest(const std::string& frame);
std::string EncodeReply(const Reply& r);
std::optional<Reply> DecodeReply(const std::string& frame);

// Reads one frame from `fd` (blocking); nullopt on EOF, a short read, a bad magic or a frame
// over `max_bytes`.
std::optional<std::string> ReadFrame(int fd, size_t max_bytes);
// Writes all of `frame`; false on error.
bool WriteAll(int fd, const std::string& frame);

// The session's directory: $XDG_RUNTIME_DIR/gpupool when that is set, else
// /tmp/gpupool-<uid>. With `create` it is made (0700) if missing. Returns an empty string —
// and `why` says what is wrong — when it is not a directory owned by `uid` with mode 0700: a
// directory another user made first must not receive our token.
std::string SessionDir(uid_t uid, bool create, std::string* why);
std::string SocketPath(const std::string& dir);  // dir + "/ctl.sock"

// The uid at the other end of a connected Unix socket, or -1.
long PeerUid(int fd);

// A connection to this user's helper (SessionDir without creating it, its socket, the peer's uid
// checked), or -1 with `why` ("no session: …", or what was refused).
int ConnectToSession(std::string* why);

}  // namespace gpupool::ctl::session
