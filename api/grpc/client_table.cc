#include "api/grpc/client_table.h"

#include <sys/stat.h>

#include <vector>

namespace gpupool::api::grpcface {

namespace {

// The socket identity of `fd`, or false when it is closed.
bool Identity(int fd, dev_t* dev, ino_t* ino) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}

}  // namespace

bool ClientTable::Admit(int fd, const std::string& client) {
  if (!track_) return true;
  // The kernel handed out this number again, so whatever it named before is closed.
  Forget(fd);
  auto it = by_client_.find(client);
  if (limit_ > 0 && it != by_client_.end() && it->second.size() >= limit_) {
    Sweep(client);
    it = by_client_.find(client);
    if (it != by_client_.end() && it->second.size() >= limit_) return false;
  }
  Entry e{client};
  if (!Identity(fd, &e.dev, &e.ino)) return false;  // closed under us: nothing to serve
  by_fd_.emplace(fd, std::move(e));
  by_client_[client].insert(fd);
  return true;
}

size_t ClientTable::Count(const std::string& client) const {
  auto it = by_client_.find(client);
  return it == by_client_.end() ? 0 : it->second.size();
}

bool ClientTable::AtLeastOpen(size_t n) {
  if (by_fd_.size() < n) return false;
  std::vector<std::string> clients;
  for (const auto& [client, _] : by_client_) clients.push_back(client);
  for (const std::string& c : clients) Sweep(c);
  return by_fd_.size() >= n;
}

void ClientTable::Forget(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  auto c = by_client_.find(it->second.client);
  if (c != by_client_.end()) {
    c->second.erase(fd);
    if (c->second.empty()) by_client_.erase(c);
  }
  by_fd_.erase(it);
}

void ClientTable::Sweep(const std::string& client) {
  auto c = by_client_.find(client);
  if (c == by_client_.end()) return;
  std::vector<int> gone;
  for (int fd : c->second) {
    const Entry& e = by_fd_.at(fd);
    dev_t dev = 0;
    ino_t ino = 0;
    if (!Identity(fd, &dev, &ino) || dev != e.dev || ino != e.ino) gone.push_back(fd);
  }
  for (int fd : gone) Forget(fd);
}

}  // namespace gpupool::api::grpcface
