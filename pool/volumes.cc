#include "pool/volumes.h"

#include <string_view>

namespace gpupool {

Status CheckVolumeMountPath(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("must not be empty");
  if (path.size() > 1024) return Status::InvalidArgument("longer than 1024 bytes");
  if (path[0] != '/') return Status::InvalidArgument("'" + path + "' is not an absolute path");
  if (path == "/") return Status::InvalidArgument("'/' is the image's root");
  if (path.back() == '/') return Status::InvalidArgument("'" + path + "' ends in '/'");
  // Every component is a name: no empty one ("//"), no "." or "..", no NUL.
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return Status::InvalidArgument("'" + path + "' is not normalised (empty, '.' or '..' part)");
    }
    if (part.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("contains a NUL byte");
    }
    start = end + 1;
  }
  for (std::string_view reserved : {"/proc", "/sys", "/dev"}) {
    if (path.compare(0, reserved.size(), reserved) == 0 &&
        (path.size() == reserved.size() || path[reserved.size()] == '/')) {
      return Status::InvalidArgument("'" + path + "' is under " + std::string(reserved) +
                                     ", which the runtime mounts");
    }
  }
  return Status::Ok();
}

Status CheckDatasetName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("must not be empty");
  if (name.size() > 63) return Status::InvalidArgument("longer than 63 characters");
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alnum || (i > 0 && (c == '.' || c == '_' || c == '-'))) continue;
    return Status::InvalidArgument("'" + name +
                                   "' is not [a-z0-9][a-z0-9._-]* (lowercase letters, digits, and "
                                   "'.', '_', '-' after the first)");
  }
  return Status::Ok();
}

}  // namespace gpupool
