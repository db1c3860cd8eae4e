// ImageReference: an OCI image reference as a tenant writes it, parsed and checked.
//
//   [registry[:port]/]repository[:tag][@sha256:<64 hex>]
//
// The registry is the first component when it contains '.' or ':' or is "localhost"; otherwise
// the image is on docker.io, and a one-component repository there is under "library/" (Docker's
// rule). No tag and no digest means ":latest". Repository components are lowercase alphanumerics
// separated by '.', '_', "__" or '-' runs (the distribution spec's grammar); a tag is
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; only sha256 digests are accepted.
//
// Parse errors are InvalidArgument and name the part that is wrong, so a submission can be
// refused naming the field.
#pragma once

#include <string>

#include "base/status.h"

namespace gpupool {

struct ImageReference {
  std::string registry;    // "docker.io", "127.0.0.1:5000"
  std::string repository;  // "library/busybox"
  std::string tag;         // empty when pinned by digest only
  std::string digest;      // "sha256:…" or empty

  // "registry/repository:tag", "registry/repository@sha256:…" (digest wins over tag).
  std::string Canonical() const;
  // What skopeo is given: "docker://" + Canonical().
  std::string Transport() const { return "docker://" + Canonical(); }
  // "registry/repository@digest" for a manifest digest fetched later.
  std::string WithDigest(const std::string& digest) const;
};

Result<ImageReference> ParseImageReference(const std::string& text);

// true for "sha256:" followed by 64 lowercase hex digits.
bool IsSha256Digest(const std::string& digest);

}  // namespace gpupool
