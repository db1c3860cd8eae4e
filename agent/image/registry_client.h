// RegistryClient: the OCI distribution protocol, spoken by skopeo (never by hand).
//
// InspectRaw fetches a manifest's exact bytes (`skopeo inspect --raw`); CopyToLayout copies an
// image by digest into an OCI layout directory (`skopeo copy --preserve-digests`), fetching only
// the blobs the layout lacks. A credential reaches skopeo as an auth file on a memfd
// (/proc/self/fd/3), so it is in no file and on no command line; without one skopeo runs with
// --no-creds and never reads the node's own login files.
//
// A registry that is down (connection refused, timeouts, 5xx, 429) is retried `pull_attempts`
// times with a doubling back-off; other failures return at once, classified (see
// image_store.h's error table). Classification reads skopeo's messages, which name the
// registry's error codes (MANIFEST_UNKNOWN, UNAUTHORIZED, …) and Go's network errors.
//
// Thread safety: one client per pull; distinct clients may run concurrently.
#pragma once

#include <string>

#include "agent/image/image_store.h"
#include "base/run_tool.h"
#include "base/status.h"
#include "pool/image_reference.h"

namespace gpupool::agent::image {

class RegistryClient {
 public:
  RegistryClient(const ImageStoreOptions& options, const RegistryCredential& credential)
      : options_(options), credential_(credential) {}

  // `target` is "registry/repo:tag" or "registry/repo@digest"; `ref` names the image in errors.
  Result<std::string> InspectRaw(const ImageReference& ref, const std::string& target);
  Status CopyToLayout(const ImageReference& ref, const std::string& target,
                      const std::string& layout, const std::string& tag);

 private:
  Result<ToolResult> RunWithRetry(const ImageReference& ref, std::vector<std::string> args,
                                  const std::string& creds_flag, const std::string& no_creds_flag);

  const ImageStoreOptions& options_;
  const RegistryCredential& credential_;
};

// Maps a failed skopeo run to the store's error vocabulary (exposed for tests).
Status ClassifySkopeoFailure(const std::string& image, const ToolResult& run);

}  // namespace gpupool::agent::image
