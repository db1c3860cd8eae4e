#include "api/validate.h"

#include <charconv>
#include <string>

#include "scheduler/model.h"

namespace gpupool::api {
namespace {

constexpr std::string_view kNamePattern = "[a-z0-9][a-z0-9-_.]*";
constexpr std::string_view kTokenPrefix = "after:";
constexpr std::string_view kB64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsNameChar(char c) { return IsNameStart(c) || c == '-' || c == '_' || c == '.'; }

// Empty when `s` is a valid name; otherwise what is wrong with it, after `label` ("segment 2").
std::string NameProblem(std::string_view s, std::string_view label = "") {
  std::string lead = label.empty() ? "" : std::string(label) + " ";
  if (s.empty()) return lead + "must not be empty";
  if (s.size() > kMaxNameLength) {
    return lead + "must be at most " + std::to_string(kMaxNameLength) + " characters, got " +
           std::to_string(s.size());
  }
  bool ok = IsNameStart(s[0]);
  for (char c : s) ok = ok && IsNameChar(c);
  if (!ok) return lead + "'" + std::string(s) + "' must match " + std::string(kNamePattern);
  return "";
}

std::string Base64UrlEncode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kB64[(acc >> bits) & 0x3f];
    }
  }
  if (bits > 0) out += kB64[(acc << (6 - bits)) & 0x3f];
  return out;
}

bool Base64UrlDecode(std::string_view in, std::string* out) {
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    size_t v = kB64.find(c);
    if (v == std::string_view::npos) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

bool ParsePositive(std::string_view s, int64_t* v) {
  if (s.empty() || s[0] == '+' || s[0] == '-') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && *v > 0;
}

}  // namespace

Status Invalid(std::string_view field, std::string_view message) {
  return Status::InvalidArgument(std::string(field) + ": " + std::string(message));
}

Status CheckRange(int64_t v, int64_t lo, int64_t hi, std::string_view field) {
  if (v < lo || v > hi) {
    return Invalid(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                              ", got " + std::to_string(v));
  }
  return Status::Ok();
}

std::string FieldPath(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  if (child.empty()) return std::string(parent);
  return std::string(parent) + "." + std::string(child);
}

Status ValidateName(std::string_view name, std::string_view field) {
  std::string problem = NameProblem(name);
  if (!problem.empty()) return Invalid(field, problem);
  return Status::Ok();
}

Result<int64_t> JobIdFromString(std::string_view id, std::string_view field) {
  int64_t v = 0;
  if (id.empty()) return Invalid(field, "must not be empty");
  if (!ParsePositive(id, &v)) {
    return Invalid(field, "must be a positive integer, got '" + std::string(id) + "'");
  }
  return v;
}

Status ValidateTaskId(std::string_view id, std::string_view field) {
  int64_t job = 0;
  int32_t index = 0;
  if (id.empty()) return Invalid(field, "must not be empty");
  if (!ParseTaskId(id, &job, &index) || job <= 0 || index < 0) {
    return Invalid(field, "must look like <job>.<index>, e.g. 12.0, got '" + std::string(id) + "'");
  }
  return Status::Ok();
}

std::string EncodePageToken(int64_t after_id) {
  if (after_id <= 0) return "";
  return Base64UrlEncode(std::string(kTokenPrefix) + std::to_string(after_id));
}

Result<int64_t> DecodePageToken(std::string_view token, std::string_view field) {
  if (token.empty()) return int64_t{0};
  std::string raw;
  int64_t id = 0;
  if (token.size() > 64 || !Base64UrlDecode(token, &raw) || !raw.starts_with(kTokenPrefix) ||
      !ParsePositive(std::string_view(raw).substr(kTokenPrefix.size()), &id)) {
    return Invalid(field, "malformed page token; pass next_page_token from a previous response");
  }
  return id;
}

}  // namespace gpupool::api
