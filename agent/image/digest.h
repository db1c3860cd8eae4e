// Digest: sha256 of bytes and of files (OpenSSL), as lowercase hex.
//
// Thread safety: free functions, safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace gpupool::agent::image {

std::string Sha256Hex(const std::string& bytes);

struct FileDigest {
  std::string hex;
  int64_t size = 0;
};
// Streams the file; NotFound when it cannot be opened.
Result<FileDigest> Sha256File(const std::string& path);

// Status(kDataLoss, message): what a digest that does not match is.
Status DataLoss(std::string message);

}  // namespace gpupool::agent::image
