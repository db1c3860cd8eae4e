#include "api/rest/router.h"

#include <set>

namespace gpupool::api::rest {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool IsCapture(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

}  // namespace

Result<std::string> PercentDecode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      const int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
      const int lo = i + 2 < in.size() ? HexValue(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return Status::InvalidArgument("bad percent-encoding in '" + std::string(in) + "'");
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  if (query.empty()) return out;
  for (std::string_view part : Split(query, '&')) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string_view raw_key = part.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    GPUPOOL_ASSIGN_OR_RETURN(std::string key, PercentDecode(raw_key, true));
    GPUPOOL_ASSIGN_OR_RETURN(std::string value, PercentDecode(raw_value, true));
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

size_t Router::Add(std::string method, std::string_view pattern) {
  Route r;
  r.method = std::move(method);
  r.pattern = std::string(pattern);
  std::string_view path = pattern.substr(1);  // patterns start with '/'
  const size_t last_slash = path.rfind('/');
  const size_t colon = path.find(':', last_slash == std::string_view::npos ? 0 : last_slash);
  if (colon != std::string_view::npos) {
    r.verb = std::string(path.substr(colon + 1));
    path = path.substr(0, colon);
  }
  for (std::string_view seg : Split(path, '/')) r.segments.emplace_back(seg);
  routes_.push_back(std::move(r));
  return routes_.size() - 1;
}

bool Router::MatchRoute(const Route& r, const std::vector<std::string>& segments,
                        std::string_view verb,
                        std::vector<std::pair<std::string, std::string>>* params) {
  if (r.verb != verb || r.segments.size() != segments.size()) return false;
  std::vector<std::pair<std::string, std::string>> captured;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& want = r.segments[i];
    if (IsCapture(want)) {
      if (segments[i].empty()) return false;
      captured.emplace_back(want.substr(1, want.size() - 2), segments[i]);
    } else if (want != segments[i]) {
      return false;
    }
  }
  *params = std::move(captured);
  return true;
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  Match m;
  if (path.empty() || path.front() != '/') return m;
  const std::vector<std::string_view> raw = Split(path.substr(1), '/');

  // A raw ':' in the last segment starts a custom verb ("abc:cancel"); a name holding a colon
  // sends it percent-encoded ("a%3Ab"), which decodes after the split.
  std::vector<std::string> segments;
  std::string verb;
  for (size_t i = 0; i < raw.size(); ++i) {
    std::string_view seg = raw[i];
    if (i + 1 == raw.size()) {
      const size_t colon = seg.find(':');
      if (colon != std::string_view::npos) {
        verb = std::string(seg.substr(colon + 1));
        seg = seg.substr(0, colon);
      }
    }
    Result<std::string> decoded = PercentDecode(seg, false);
    if (!decoded.ok()) return m;
    segments.push_back(std::move(decoded).value());
  }

  std::set<std::string> allowed;
  for (size_t i = 0; i < routes_.size(); ++i) {
    std::vector<std::pair<std::string, std::string>> params;
    if (!MatchRoute(routes_[i], segments, verb, &params)) continue;
    if (routes_[i].method == method) {
      m.kind = Match::kFound;
      m.route = i;
      m.params = std::move(params);
      return m;
    }
    allowed.insert(routes_[i].method);
  }
  if (!allowed.empty()) {
    m.kind = Match::kMethodNotAllowed;
    for (const std::string& a : allowed) {
      if (!m.allowed.empty()) m.allowed += ", ";
      m.allowed += a;
    }
  }
  return m;
}

}  // namespace gpupool::api::rest
