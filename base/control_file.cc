#include "base/control_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpupool {

Status WriteControlFile(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = write(fd, value.data(), value.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Status::Internal("cannot write '" + value + "' to " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace gpupool
