#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "agent/scrub/scrubber.h"

namespace gpupool::agent {
namespace {

constexpr size_t kChunk = 1 << 20;

Status Errno(const std::string& what, const std::string& path) {
  return Status::Internal("vram scrub: " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

SimScrubber::SimScrubber(std::string dir, int64_t bytes) : dir_(std::move(dir)), bytes_(bytes) {}

std::string SimScrubber::PathOf(const std::string& uuid) const { return dir_ + "/vram-" + uuid; }

Status SimScrubber::EnsureFile(const std::string& uuid) const {
  const std::string path = PathOf(uuid);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return Errno("cannot create", path);
  fchmod(fd, 0666);
  const int rc = ftruncate(fd, bytes_);
  close(fd);
  if (rc != 0) return Errno("cannot size", path);
  return Status::Ok();
}

Result<ScrubResult> SimScrubber::Scrub(const std::string& uuid) {
  const auto start = std::chrono::steady_clock::now();
  GPUPOOL_RETURN_IF_ERROR(EnsureFile(uuid));
  const std::string path = PathOf(uuid);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  std::vector<char> zeros(kChunk, 0), back(kChunk);
  Status st;
  // Zero, then read back: a device that does not hold what was written is not clean.
  for (int64_t off = 0; off < bytes_ && st.ok(); off += static_cast<int64_t>(kChunk)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(kChunk, bytes_ - off));
    if (pwrite(fd, zeros.data(), n, off) != static_cast<ssize_t>(n))
      st = Errno("cannot write", path);
  }
  if (st.ok() && fail_next_.erase(uuid)) {
    // Simulates a device whose memory does not take the pattern (a stuck page).
    const char one = 1;
    [[maybe_unused]] ssize_t w = pwrite(fd, &one, 1, bytes_ / 2);
  }
  for (int64_t off = 0; off < bytes_ && st.ok(); off += static_cast<int64_t>(kChunk)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(kChunk, bytes_ - off));
    if (pread(fd, back.data(), n, off) != static_cast<ssize_t>(n)) {
      st = Errno("cannot read back", path);
    } else if (std::memcmp(back.data(), zeros.data(), n) != 0) {
      const size_t at = static_cast<size_t>(
          std::find_if(back.begin(), back.begin() + static_cast<std::ptrdiff_t>(n),
                       [](char c) { return c != 0; }) -
          back.begin());
      st = Status(StatusCode::kDataLoss, "vram scrub of " + uuid + ": verify failed at offset " +
                                             std::to_string(off + static_cast<int64_t>(at)) +
                                             " (memory did not read back as zero)");
    }
  }
  close(fd);
  if (!st.ok()) return st;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return ScrubResult{bytes_, us};
}

}  // namespace gpupool::agent
