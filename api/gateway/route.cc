#include "api/gateway/route.h"

namespace gpupool::api::gateway {

std::optional<RouteMatch> MatchRoute(std::string_view target,
                                     const std::vector<std::string>& names) {
  constexpr std::string_view kPrefix = "/services/";
  if (target.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view after = target.substr(kPrefix.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (n.empty() || after.substr(0, n.size()) != n) continue;
    const std::string_view tail = after.substr(n.size());
    // A whole segment: the name ends the path, or a '/' or '?' follows it.
    if (!tail.empty() && tail.front() != '/' && tail.front() != '?') continue;
    RouteMatch m;
    m.service = i;
    if (tail.empty() || tail.front() == '?') {
      m.rest = "/" + std::string(tail);
    } else {
      m.rest = std::string(tail);
    }
    return m;
  }
  return std::nullopt;
}

std::optional<size_t> PickLeastOutstanding(const std::vector<Candidate>& candidates,
                                           uint64_t turn) {
  std::optional<size_t> best;
  const size_t n = candidates.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (turn + k) % n;
    if (!candidates[i].ready) continue;
    if (!best || candidates[i].outstanding < candidates[*best].outstanding) best = i;
  }
  return best;
}

bool IsIdempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS" || method == "TRACE";
}

}  // namespace gpupool::api::gateway
