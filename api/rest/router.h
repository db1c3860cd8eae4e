// Router: matches an HTTP method and request target against the REST surface's URL patterns.
//
// Patterns follow Google's HTTP rule syntax, the subset gpupool uses: literal segments, `{field}`
// segments that capture one path segment (percent-decoded) into a request field — `{pool.name}`
// names a nested one — and an optional custom verb after the last segment, as in
// "/v1/jobs/{job_id}:cancel"; a raw ':' in a request's last segment always starts the verb, so a
// name that holds a colon is sent percent-encoded ("%3A"). A path that matches a pattern under
// another method is a 405 with the allowed methods, one that matches nothing a 404.
//
// Thread safety: immutable after construction; Match() may be called from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpupool::api::rest {

// "a=1&b=x%20y" → {{"a","1"},{"b","x y"}}; INVALID_ARGUMENT on bad percent-encoding.
Result<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query);
// "%41+b" → "A+b" (a '+' is a space only in the query, see ParseQuery).
Result<std::string> PercentDecode(std::string_view in, bool plus_is_space);

class Router {
 public:
  // Adds a route; returns its index, the id Match() reports.
  size_t Add(std::string method, std::string_view pattern);

  struct Match {
    enum Kind { kFound, kNotFound, kMethodNotAllowed } kind = kNotFound;
    size_t route = 0;
    // Captured {field} values, in pattern order: (field path, decoded value).
    std::vector<std::pair<std::string, std::string>> params;
    // For kMethodNotAllowed: the methods the path does accept, e.g. "GET, PATCH".
    std::string allowed;
  };
  // `path` is the request target without the query string. Bad percent-encoding is kNotFound.
  Match Find(std::string_view method, std::string_view path) const;

  const std::string& pattern(size_t route) const { return routes_[route].pattern; }
  const std::string& method(size_t route) const { return routes_[route].method; }

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  // "{x}" for a capture
    std::string verb;                   // after ':' in the last segment; empty = none
  };
  static bool MatchRoute(const Route& r, const std::vector<std::string>& segments,
                         std::string_view verb,
                         std::vector<std::pair<std::string, std::string>>* params);

  std::vector<Route> routes_;
};

}  // namespace gpupool::api::rest
