// Tenant webhooks (webhooks.h): names, ids and endpoint URLs.
#include "scheduler/webhooks.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace gpupool {

const std::vector<std::string>& WebhookEventKinds() {
  static const std::vector<std::string> kKinds = {
      "job.submitted",        "job.cancelled",    "task.state",
      "task.preempted",       "task.lost",        "task.gang_stopped",
      "service.created",      "service.updated",  "service.deleted",
      "service.scaled",       "service.degraded", "service.recovered",
      "service.rollout_done", "budget.threshold",
  };
  return kKinds;
}

std::string WebhookDeliveryId(int64_t webhook_id, int64_t event_id) {
  return std::to_string(webhook_id) + "-" + std::to_string(event_id);
}

namespace {

bool IsLoopbackHost(const std::string& host) {
  return host == "127.0.0.1" || host == "::1" || host == "localhost";
}

bool HostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == ':';
}

}  // namespace

Result<WebhookUrl> ParseWebhookUrl(const std::string& url, bool allow_insecure_loopback,
                                   const std::string& field) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(field + ": '" + url.substr(0, 200) + "' " + why);
  };
  if (url.size() > 2048) return bad("is longer than 2048 characters");
  WebhookUrl out;
  std::string rest;
  if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    out.tls = false;
    out.port = 80;
    rest = url.substr(7);
  } else {
    return bad("must start with https://");
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return bad("has a space or control");
  }
  if (url.find('#') != std::string::npos) return bad("has a fragment (#…)");
  const size_t slash = rest.find_first_of("/?");
  std::string authority = rest.substr(0, slash);
  out.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (authority.find('@') != std::string::npos) return bad("has user info (user@…)");
  std::string port;
  bool has_port = false;
  if (authority.starts_with("[")) {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string::npos) return bad("has an unclosed [ in its host");
    out.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("has text after its host's ]");
      port = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      has_port = true;
    }
  }
  if (out.host.empty() || !std::all_of(out.host.begin(), out.host.end(), HostChar)) {
    return bad("has no valid host");
  }
  if (has_port) {
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      return bad("has no valid port (1 to 65535)");
    }
    out.port = static_cast<uint16_t>(p);
  }
  if (!out.tls && !(allow_insecure_loopback && IsLoopbackHost(out.host))) {
    return bad("must start with https:// (deliveries are sent over TLS only)");
  }
  return out;
}

Status CheckWebhookEventKinds(const std::vector<std::string>& kinds, const std::string& field) {
  const std::vector<std::string>& known = WebhookEventKinds();
  std::set<std::string> seen;
  for (const std::string& k : kinds) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      std::string list;
      for (const std::string& n : known) list += (list.empty() ? "" : ", ") + n;
      return Status::InvalidArgument(field + ": unknown event kind '" + k.substr(0, 100) +
                                     "' (known: " + list + ")");
    }
    if (!seen.insert(k).second) {
      return Status::InvalidArgument(field + ": event kind '" + k + "' is listed twice");
    }
  }
  return Status::Ok();
}

}  // namespace gpupool
