// ReservationBook (reservation_book.h).
#include "scheduler/reservation_book.h"

#include <utility>

namespace gpupool {

int64_t ReservationBook::Add(Reservation r) {
  const int64_t id = next_id_++;
  by_id_.emplace(id, std::move(r));
  return id;
}

Reservation* ReservationBook::Find(int64_t id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

const Reservation* ReservationBook::Find(int64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

std::vector<int64_t> ReservationBook::Ids() const {
  std::vector<int64_t> out;
  out.reserve(by_id_.size());
  for (const auto& [id, r] : by_id_) out.push_back(id);
  return out;
}

std::vector<const Reservation*> ReservationBook::OnNode(const std::string& pool,
                                                        const std::string& node) const {
  std::vector<const Reservation*> out;
  for (const auto& [id, r] : by_id_) {
    if ((pool.empty() || r.pool == pool) && r.allocation.node == node) out.push_back(&r);
  }
  return out;
}

std::vector<int64_t> ReservationBook::IdsOnNode(const std::string& node) const {
  std::vector<int64_t> out;
  for (const auto& [id, r] : by_id_)
    if (r.allocation.node == node) out.push_back(id);
  return out;
}

std::vector<int64_t> ReservationBook::IdsInPool(const std::string& pool) const {
  std::vector<int64_t> out;
  for (const auto& [id, r] : by_id_)
    if (r.pool == pool) out.push_back(id);
  return out;
}

std::vector<int64_t> ReservationBook::GroupOf(int64_t id) const {
  const Reservation* r = Find(id);
  if (r == nullptr) return {};
  if (!r->gang) return {id};
  std::vector<int64_t> out;
  for (const auto& [other_id, other] : by_id_) {
    if (other.job_id == r->job_id && other.gang) out.push_back(other_id);
  }
  return out;
}

bool ReservationBook::GroupReady(int64_t id) const {
  for (int64_t g : GroupOf(id))
    if (!by_id_.at(g).victims.empty()) return false;
  return true;
}

}  // namespace gpupool
