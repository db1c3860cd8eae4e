#include "cmd/ctl/session_wire.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace gpupool::ctl::session {
namespace {

constexpr char kMagic[] = "GPC1";
constexpr size_t kMagicLen = 4;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetU32(const std::string& in, size_t* at, uint32_t* v) {
  if (in.size() - *at < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i)
    *v |= static_cast<uint32_t>(static_cast<unsigned char>(in[*at + i])) << (8 * i);
  *at += 4;
  return true;
}

std::string Frame(const std::vector<std::string>& parts) {
  std::string body;
  PutU32(&body, static_cast<uint32_t>(parts.size()));
  for (const std::string& p : parts) {
    PutU32(&body, static_cast<uint32_t>(p.size()));
    body += p;
  }
  std::string out(kMagic, kMagicLen);
  PutU32(&out, static_cast<uint32_t>(body.size()));
  return out + body;
}

// The strings of a frame's body (after magic and length), or nullopt when it does not parse.
std::optional<std::vector<std::string>> Parts(const std::string& frame) {
  if (frame.size() < kMagicLen + 4 || frame.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    return std::nullopt;
  size_t at = kMagicLen;
  uint32_t body = 0;
  if (!GetU32(frame, &at, &body) || body != frame.size() - at) return std::nullopt;
  uint32_t n = 0;
  if (!GetU32(frame, &at, &n) || n > frame.size()) return std::nullopt;
  std::vector<std::string> parts;
  parts.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    if (!GetU32(frame, &at, &len) || frame.size() - at < len) return std::nullopt;
    parts.push_back(frame.substr(at, len));
    at += len;
  }
  if (at != frame.size()) return std::nullopt;
  return parts;
}

bool ReadAll(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t got = ::read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

std::string EncodeRequest(const Request& r) {
  std::vector<std::string> parts = {r.cwd, r.server, r.token, r.ca, r.config_path};
  parts.insert(parts.end(), r.args.begin(), r.args.end());
  return Frame(parts);
}

std::optional<Request> DecodeRequest(const std::string& frame) {
  std::optional<std::vector<std::string>> p = Parts(frame);
  if (!p || p->size() < 5) return std::nullopt;
  Request r;
  r.cwd = (*p)[0], r.server = (*p)[1], r.token = (*p)[2], r.ca = (*p)[3];
  r.config_path = (*p)[4];
  r.args.assign(p->begin() + 5, p->end());
  return r;
}

std::string EncodeReply(const Reply& r) {
  return Frame({r.served ? "served" : "not served", std::to_string(r.exit_code), r.out, r.err});
}

std::optional<Reply> DecodeReply(const std::string& frame) {
  std::optional<std::vector<std::string>> p = Parts(frame);
  if (!p || p->size() != 4) return std::nullopt;
  Reply r;
  if ((*p)[0] != "served" && (*p)[0] != "not served") return std::nullopt;
  r.served = (*p)[0] == "served";
  char* end = nullptr;
  const long code = std::strtol((*p)[1].c_str(), &end, 10);
  if (end == (*p)[1].c_str() || *end != '\0' || code < 0 || code > 255) return std::nullopt;
  r.exit_code = static_cast<int>(code);
  r.out = std::move((*p)[2]);
  r.err = std::move((*p)[3]);
  return r;
}

std::optional<std::string> ReadFrame(int fd, size_t max_bytes) {
  std::string head(kMagicLen + 4, '\0');
  if (!ReadAll(fd, head.data(), head.size())) return std::nullopt;
  if (head.compare(0, kMagicLen, kMagic, kMagicLen) != 0) return std::nullopt;
  size_t at = kMagicLen;
  uint32_t len = 0;
  GetU32(head, &at, &len);
  if (len > max_bytes) return std::nullopt;
  std::string frame = head;
  frame.resize(head.size() + len);
  if (!ReadAll(fd, frame.data() + head.size(), len)) return std::nullopt;
  return frame;
}

bool WriteAll(int fd, const std::string& frame) {
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string SessionDir(uid_t uid, bool create, std::string* why) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string dir = runtime != nullptr && runtime[0] == '/'
                              ? std::string(runtime) + "/gpupool"
                              : "/tmp/gpupool-" + std::to_string(uid);
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = dir + ": cannot create: " + std::strerror(errno);
    return "";
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    *why = dir + ": " + std::strerror(errno);
    return "";
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 0777) != 0700) {
    *why = dir + ": not a directory of uid " + std::to_string(uid) +
           " with mode 0700; refusing to use it";
    return "";
  }
  return dir;
}

std::string SocketPath(const std::string& dir) { return dir + "/ctl.sock"; }

long PeerUid(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return static_cast<long>(cred.uid);
}

int ConnectToSession(std::string* why) {
  const std::string dir = SessionDir(::getuid(), /*create=*/false, why);
  if (dir.empty()) {
    *why = "no session: " + *why;
    return -1;
  }
  const std::string path = SocketPath(dir);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *why = path + ": path too long for a Unix socket";
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::strerror(errno);
    return -1;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    *why = "no session at " + path + " (" + std::strerror(errno) + ")";
    ::close(fd);
    return -1;
  }
  if (PeerUid(fd) != static_cast<long>(::getuid())) {
    *why = path + ": answered by another user; refusing it";
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace gpupool::ctl::session
