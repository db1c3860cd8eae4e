// Test support for images: a real OCI registry (Debian's docker-registry, the CNCF distribution
// server) on a loopback port with its storage in a temp dir, and test images built from local
// files with umoci and pushed with skopeo. Nothing reaches outside the machine.
//
// LocalRegistry::Start() returns an error (the caller skips, saying why) when a tool is missing.
// The registry's access log is kept, so a test can count the requests for each blob.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool::testing {

class LocalRegistry {
 public:
  ~LocalRegistry();
  // `htpasswd_user`/`password` non-empty: the registry requires that basic-auth login.
  Status Start(const std::string& htpasswd_user = "", const std::string& bcrypt_hash = "");
  void Stop();
  bool running() const { return pid_ > 0; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  // Number of GET requests the registry served for this blob ("sha256:…"), counting from byte
  // `since` of its access log (LogBytes() at some earlier moment).
  int BlobGets(const std::string& digest, size_t since = 0) const;
  size_t LogBytes() const;
  // Where the registry keeps a blob's bytes.
  std::string BlobDataPath(const std::string& digest) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// One layer: files (path in the image → content; mode 0755 for paths under /bin).
struct TestLayer {
  std::map<std::string, std::string> files;
  std::map<std::string, std::string> copy_from_host;  // path in image → host file
  std::map<std::string, std::string> symlinks;        // path in image → target
};

// Builds an image of these layers (in order) in an OCI layout under `work_dir` and pushes it to
// `registry` as repository:tag; returns the manifest digest ("sha256:…").
Result<std::string> BuildAndPush(const LocalRegistry& registry, const std::string& work_dir,
                                 const std::string& repository, const std::string& tag,
                                 const std::vector<TestLayer>& layers,
                                 const std::vector<std::string>& cmd = {"/bin/sh"},
                                 const std::string& push_user = "",
                                 const std::string& push_password = "");

// A layer with a static busybox at /bin/busybox and links for the applets the tests use.
TestLayer BusyboxLayer();

// Directory "<prefix>XXXXXX" made with mkdtemp.
std::string MakeScratchDir(const std::string& prefix);
std::string ReadWholeFile(const std::string& path);

}  // namespace gpupool::testing
