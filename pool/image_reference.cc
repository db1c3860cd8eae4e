#include "pool/image_reference.h"

namespace gpupool {
namespace {

bool LowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Hex(char c) { return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9'); }

// [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*  (the distribution spec's path component)
bool ValidComponent(const std::string& part) {
  size_t i = 0;
  const size_t n = part.size();
  while (true) {
    if (i >= n || !LowerAlnum(part[i])) return false;
    while (i < n && LowerAlnum(part[i])) ++i;
    if (i == n) return true;
    if (part[i] == '.') {
      ++i;
    } else if (part[i] == '_') {
      ++i;
      if (i < n && part[i] == '_') ++i;
    } else if (part[i] == '-') {
      while (i < n && part[i] == '-') ++i;
    } else {
      return false;
    }
  }
}

bool ValidRepository(const std::string& repo) {
  size_t begin = 0;
  while (true) {
    size_t slash = repo.find('/', begin);
    std::string part = repo.substr(begin, slash == std::string::npos ? slash : slash - begin);
    if (!ValidComponent(part)) return false;
    if (slash == std::string::npos) return true;
    begin = slash + 1;
  }
}

// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
bool ValidTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 128) return false;
  for (size_t i = 0; i < tag.size(); ++i) {
    char c = tag[i];
    bool word =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!word && (i == 0 || (c != '.' && c != '-'))) return false;
  }
  return true;
}

}  // namespace

bool IsSha256Digest(const std::string& digest) {
  if (digest.size() != 71 || digest.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < digest.size(); ++i) {
    if (!Hex(digest[i])) return false;
  }
  return true;
}

std::string ImageReference::Canonical() const {
  std::string base = registry + "/" + repository;
  if (!digest.empty()) return base + "@" + digest;
  return base + ":" + tag;
}

std::string ImageReference::WithDigest(const std::string& d) const {
  return registry + "/" + repository + "@" + d;
}

Result<ImageReference> ParseImageReference(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("image: empty reference");
  if (text.size() > 1024) return Status::InvalidArgument("image: reference longer than 1024");
  ImageReference ref;
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
    if (!ValidTag(ref.tag)) {
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

}  // namespace gpupool
