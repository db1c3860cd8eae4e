#include "scheduler/join_tokens.h"

#include <ctime>

namespace gpupool {
namespace {

std::string Rfc3339(int64_t ms) {
  const std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string_view JoinTokenState(const JoinTokenRecord& t, int64_t now_ms) {
  if (t.revoke_ms != 0) return "revoked";
  if (t.expire_ms != 0 && now_ms >= t.expire_ms) return "expired";
  if (t.max_uses != 0 && t.uses >= t.max_uses) return "used-up";
  return "usable";
}

Status JoinTokenUsable(const JoinTokenRecord& t, int64_t now_ms) {
  const std::string name = "join token " + t.id;
  const std::string_view state = JoinTokenState(t, now_ms);
  if (state == "revoked") return Status::FailedPrecondition(name + " was revoked");
  if (state == "expired") {
    return Status::FailedPrecondition(name + " expired at " + Rfc3339(t.expire_ms));
  }
  if (state == "used-up") {
    return Status::FailedPrecondition(name + " has been used " + std::to_string(t.uses) + " of " +
                                      std::to_string(t.max_uses) + " times");
  }
  return Status::Ok();
}

}  // namespace gpupool
