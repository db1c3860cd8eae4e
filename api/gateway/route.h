// The gateway's URL scheme and its choice of replica, as pure functions (no I/O, no clock).
//
// A service is reached at /services/<tenant path>/<name>/<rest>: the replica receives /<rest>
// with the query string kept. Tenant paths hold '/', so the split is found by matching the known
// services: the first whose "<tenant>/<name>" is a whole-segment prefix of what follows
// /services/ wins (a tenant path and a service name never hold '/' themselves).
//
// A replica is chosen by least outstanding requests among the ready ones; ties go round-robin
// from `turn`, so a burst on an idle service spreads instead of piling on the first replica.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::api::gateway {

struct RouteMatch {
  size_t service = 0;  // index into the names given
  std::string rest;    // the target the replica receives: "/" at least, query kept
};

// `names[i]` is "<tenant>/<name>" of service i. nullopt when the target names none.
std::optional<RouteMatch> MatchRoute(std::string_view target,
                                     const std::vector<std::string>& names);

struct Candidate {
  bool ready = false;
  int64_t outstanding = 0;
};
// The index of the ready candidate with the fewest outstanding requests, ties broken from
// `turn` on; nullopt when none is ready.
std::optional<size_t> PickLeastOutstanding(const std::vector<Candidate>& candidates, uint64_t turn);

// Idempotent methods (RFC 9110 §9.2.2) may be sent again to another replica when the first
// failed after the request was sent.
bool IsIdempotent(std::string_view method);

}  // namespace gpupool::api::gateway
