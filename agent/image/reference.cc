#include "agent/image/reference.h"

#include <regex>

namespace gpupool::agent::image {
namespace {

bool ValidRepository(const std::string& repo) {
  static const std::regex component("[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*");
  size_t begin = 0;
  while (true) {
    size_t slash = repo.find('/', begin);
    std::string part = repo.substr(begin, slash == std::string::npos ? slash : slash - begin);
    if (!std::regex_match(part, component)) return false;
    if (slash == std::string::npos) return true;
    begin = slash + 1;
  }
}

}  // namespace

bool IsSha256Digest(const std::string& digest) {
  static const std::regex re("sha256:[a-f0-9]{64}");
  return std::regex_match(digest, re);
}

std::string Reference::Canonical() const {
  std::string base = registry + "/" + repository;
  if (!digest.empty()) return base + "@" + digest;
  return base + ":" + tag;
}

std::string Reference::WithDigest(const std::string& d) const {
  return registry + "/" + repository + "@" + d;
}

Result<Reference> ParseReference(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("image: empty reference");
  if (text.size() > 1024) return Status::InvalidArgument("image: reference longer than 1024");
  Reference ref;
  std::string rest = text;
  size_t at = rest.find('@');
  if (at != std::string::npos) {
    ref.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!IsSha256Digest(ref.digest)) {
      return Status::InvalidArgument("image '" + text +
                                     "': digest must be sha256:<64 lowercase hex digits>");
    }
  }
  size_t slash = rest.find('/');
  std::string first = slash == std::string::npos ? "" : rest.substr(0, slash);
  if (!first.empty() && (first.find('.') != std::string::npos ||
                         first.find(':') != std::string::npos || first == "localhost")) {
    ref.registry = first;
    rest = rest.substr(slash + 1);
  } else {
    ref.registry = "docker.io";
  }
  size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    ref.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    static const std::regex tag_re("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
    if (!std::regex_match(ref.tag, tag_re)) {
      return Status::InvalidArgument("image '" + text + "': bad tag '" + ref.tag + "'");
    }
  }
  if (ref.registry == "docker.io" && rest.find('/') == std::string::npos) {
    rest = "library/" + rest;
  }
  if (!ValidRepository(rest)) {
    return Status::InvalidArgument("image '" + text + "': bad repository '" + rest +
                                   "' (lowercase letters, digits and . _ - separators)");
  }
  ref.repository = rest;
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

}  // namespace gpupool::agent::image
