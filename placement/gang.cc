// Engine::PlaceGang: all or nothing, by tentative commits undone in reverse order.
#include "placement/engine_impl.h"

namespace gpupool::placement {

Engine::GangResult Engine::PlaceGang(std::span<const Request> requests) {
  return PlaceGangAvoiding(requests, {});
}

Engine::GangResult Engine::PlaceGangAvoiding(std::span<const Request> requests,
                                             const std::vector<std::string>& avoid) {
  const std::vector<char> slots = impl_->AvoidSlots(avoid);
  GangResult result;
  std::vector<Allocation> tentative;
  tentative.reserve(requests.size());
  bool ok = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    Decision d = impl_->Place(requests[i], PlaceOptions{}, slots);
    // A placement from Place always commits on the state it was computed on.
    if (!d.placed || !impl_->Commit(d.allocation).ok()) {
      ok = false;
      result.failed_index = static_cast<int>(i);
      result.failed = std::move(d);
      break;
    }
    tentative.push_back(std::move(d.allocation));
  }
  // Undo in reverse order so every intermediate state is one the engine has been in before.
  for (auto it = tentative.rbegin(); it != tentative.rend(); ++it) {
    const Status st = impl_->Release(*it);
    (void)st;  // cannot fail: we committed exactly this a moment ago
  }
  if (ok) {
    result.placed = true;
    result.allocations = std::move(tentative);
  }
  return result;
}

}  // namespace gpupool::placement
