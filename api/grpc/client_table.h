// ClientTable: how many open connections each client address holds on one listening port, so a
// port can refuse a client past its limit (docs/security.md, "Connection floods").
//
//   ClientTable table(256);
//   int fd = accept4(...);
//   if (!table.Admit(fd, "127.0.0.1")) close(fd);   // over its limit: refused
//   else hand fd to the server, which closes it whenever it likes
//
// The server that owns an admitted descriptor never says when it closes it (gRPC takes the
// descriptor and keeps it to itself), so the table notices by itself: it remembers each
// descriptor's socket identity (device and inode, unique among open sockets) and counts an entry
// as gone once that descriptor is closed or names another file. It looks only when it must: a
// new admission of the same descriptor number replaces the old entry, and a client at its limit
// has its own entries checked before it is refused. So the table holds at most one entry per
// descriptor number and costs one fstat() per entry of a client at its limit.
//
// Thread safety: not thread-safe; one accept loop owns it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace gpupool::api::grpcface {

class ClientTable {
 public:
  // `limit`: the most open connections one client may hold; 0 = no limit. `track_all`: record
  // every admitted descriptor even without a per-client limit, for Open().
  explicit ClientTable(size_t limit, bool track_all = false)
      : limit_(limit), track_(limit > 0 || track_all) {}

  // Records `fd`, just accepted from `client`, and returns true; or returns false (recording
  // nothing) when `client` already holds `limit` connections that are still open.
  bool Admit(int fd, const std::string& client);

  // Open connections recorded for `client` (stale entries included until checked).
  size_t Count(const std::string& client) const;
  // Whether at least `n` recorded connections are still open: counts the entries, and checks
  // them (one fstat each) only when there are `n` or more. Needs tracking (above).
  bool AtLeastOpen(size_t n);

 private:
  struct Entry {
    std::string client;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  void Forget(int fd);
  // Drops `client`'s entries whose descriptor was closed (or reused for another file).
  void Sweep(const std::string& client);

  const size_t limit_;
  const bool track_;
  std::unordered_map<int, Entry> by_fd_;
  std::unordered_map<std::string, std::unordered_set<int>> by_client_;
};

}  // namespace gpupool::api::grpcface
