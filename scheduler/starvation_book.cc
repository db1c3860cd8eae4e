#include "scheduler/starvation_book.h"

namespace gpupool {

int64_t StarvationBook::Add(StarvationReservation r) {
  r.id = next_id_++;
  for (const std::string& n : r.nodes) holder_of_[n] = r.key;
  pools_seen_[r.pool] = true;
  const int64_t id = r.id;
  by_key_[r.key] = std::move(r);
  return id;
}

void StarvationBook::Erase(const StarvingKey& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  for (const std::string& n : it->second.nodes) holder_of_.erase(n);
  by_key_.erase(it);
}

const StarvationReservation* StarvationBook::Find(const StarvingKey& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : &it->second;
}

const StarvationReservation* StarvationBook::HolderOf(const std::string& node) const {
  auto it = holder_of_.find(node);
  return it == holder_of_.end() ? nullptr : Find(it->second);
}

int32_t StarvationBook::CountIn(const std::string& pool) const {
  int32_t n = 0;
  for (const auto& [key, r] : by_key_) n += r.pool == pool ? 1 : 0;
  return n;
}

int32_t StarvationBook::NodesIn(const std::string& pool) const {
  int32_t n = 0;
  for (const auto& [key, r] : by_key_) {
    if (r.pool == pool) n += static_cast<int32_t>(r.nodes.size());
  }
  return n;
}

bool StarvationBook::Overtaken(const std::string& pool, int64_t size, int64_t since_us) const {
  auto p = placed_.find(pool);
  if (p == placed_.end()) return false;
  for (auto it = p->second.begin(); it != p->second.end() && it->first < size; ++it) {
    if (it->second >= since_us) return true;
  }
  return false;
}

std::vector<StarvationReservation> StarvationBook::All() const {
  std::vector<StarvationReservation> out;
  out.reserve(by_key_.size());
  for (const auto& [key, r] : by_key_) out.push_back(r);
  return out;
}

}  // namespace gpupool
