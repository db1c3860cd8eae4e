// ImageStore: the node's one content-addressed store of OCI images, shared by all its tasks.
//
// Layout under `root` (all on one file system, so a rename is atomic):
//   blobs/sha256/<hex>   manifests, configs and layers, named by the sha256 of their bytes
//   rootfs/<hex>/        an image's unpacked root file system (hex = its manifest digest),
//                        read-only to tasks: they see it through an overlay (agent/oci/rootfs.h)
//   state.json           the index: images, their refs and blobs, sizes, last use
//   tmp/                 pulls and unpacks in progress; emptied at Open()
//
// Pulling. The registry protocol is skopeo's: `skopeo inspect --raw` resolves the reference to
// a manifest (an index is narrowed to this node's os/arch), `skopeo copy docker://…@<digest>
// oci:tmp/pull-…` fetches the blobs into a private OCI layout where the blobs the store already
// holds are hard-linked in first, so skopeo fetches only the missing ones. Each new blob is then
// hashed here; only a blob whose sha256 and size match the manifest is renamed into blobs/, so a
// half-written or tampered layer is never used. The rootfs is unpacked by `umoci raw unpack`
// into tmp/ and renamed into place the same way.
//
// Coalescing. Pulls of the same reference with the same credential share one leader; the others
// wait for its result. Across references, a blob is fetched by one pull at a time: a pull claims
// the blobs it lacks only when none of them is being fetched by another (it waits, holding
// nothing, otherwise), so 20 tasks of one new image fetch each layer once and there is no
// deadlock.
//
// Cache hits. A reference by digest of an image pulled without a credential is served from the
// store without contacting the registry. A tag, or an image first pulled with a credential, is
// resolved against the registry with the caller's credential (one manifest request) before the
// cached layers are used: tags move, and a private image is never handed to a caller the
// registry would refuse. One exception, for warm starts: a tag pulled without a credential that
// was resolved less than `tag_ttl_ms` ago is served from the store as resolved then (a skopeo
// round trip is most of a warm start); a tag moved since is seen once the TTL has passed.
//
// Budget. Blobs are counted against `budget_bytes`; before a pull stores new bytes, the least
// recently used blobs of images no task holds (no ImageLease alive, no pull in flight) are
// removed, and with them every image that needs them (its rootfs too). Unpacked rootfs trees
// are not counted (they are about the uncompressed size of their layers; see docs/images.md).
//
// Credentials. A RegistryCredential lives in memory only: skopeo reads it from a memfd passed as
// /proc/self/fd/3 (never a file, never argv), it is never logged, and without one skopeo is told
// --no-creds so the node's own login files are never used for a tenant.
//
// Errors (the message names the image and the cause):
//   InvalidArgument     malformed reference
//   NotFound            unknown image (no such repository, tag or digest)
//   PermissionDenied    the registry refused the credential (or needs one)
//   DataLoss            digest mismatch (manifest or blob)
//   Unavailable         registry down, after `pull_attempts` tries with doubling back-off
//   ResourceExhausted   full disk, or the image does not fit the budget beside images in use
//   Internal            a tool failed otherwise (the message carries its last stderr line)
//
// Thread safety: all methods are safe from any thread. Long work (registry, hashing, unpacking)
// runs without the lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "pool/image_reference.h"

namespace gpupool::agent::image {

struct RegistryCredential {
  std::string username;
  std::string password;
  bool empty() const { return username.empty() && password.empty(); }
};

struct ImageStoreOptions {
  std::string root;
  int64_t budget_bytes = 0;    // blobs; 0 = no budget
  int64_t min_free_bytes = 0;  // leave at least this much free on the file system
  std::string skopeo = "skopeo";
  std::string umoci = "umoci";
  bool tls_verify = true;    // false: plain HTTP allowed (loopback registries in tests)
  int pull_attempts = 4;     // for a registry that is down
  int64_t backoff_ms = 500;  // first retry delay; doubles each attempt
  int64_t tool_timeout_ms = 30 * 60 * 1000;
  // How long an anonymous tag's resolution is trusted (0: every pull asks the registry).
  int64_t tag_ttl_ms = 60'000;
  std::string os = "linux";
  std::string arch = "amd64";
};

struct BlobRef {
  std::string digest;
  int64_t size = 0;
  friend bool operator==(const BlobRef&, const BlobRef&) = default;
};

// An image the store holds, as the node reports it to gpupoold, whose placement prefers nodes
// that hold more of a task's image (docs/images.md, "Placement by cached layers").
struct CachedImage {
  std::string manifest_digest;
  std::vector<std::string> references;  // canonical (ImageReference::Canonical), as pulled
  std::vector<BlobRef> layers;
  friend bool operator==(const CachedImage&, const CachedImage&) = default;
};

struct ImageInfo {
  std::string manifest_digest;
  BlobRef config;
  std::vector<BlobRef> layers;
  int64_t manifest_size = 0;
  std::string rootfs;       // absolute path of the unpacked root file system
  std::string config_json;  // the image config (entrypoint, env, working dir …)
  int64_t bytes() const;    // manifest + config + layers
};

struct ImageStoreStats {
  int64_t pulls = 0;          // Pull() calls that returned an image
  int64_t cache_hits = 0;     // … of which fetched no blob
  int64_t blobs_fetched = 0;  // blobs stored by pulls since Open()
  int64_t bytes_fetched = 0;
  int64_t blobs_collected = 0;  // removed by the budget
  int64_t stored_bytes = 0;     // blobs now in the store
  int64_t blobs = 0;
  int64_t images = 0;
};

class ImageStore;

// Holds an image in use: its blobs and rootfs are not collected while a lease is alive.
class ImageLease {
 public:
  ImageLease() = default;
  ImageLease(ImageLease&& other) noexcept;
  ImageLease& operator=(ImageLease&& other) noexcept;
  ImageLease(const ImageLease&) = delete;
  ImageLease& operator=(const ImageLease&) = delete;
  ~ImageLease();
  const ImageInfo& image() const { return info_; }
  bool cache_hit() const { return cache_hit_; }

 private:
  friend class ImageStore;
  std::shared_ptr<ImageStore> store_;
  ImageInfo info_;
  bool cache_hit_ = false;
};

class ImageStore : public std::enable_shared_from_this<ImageStore> {
 public:
  // Creates the directories if needed, loads the index, removes what a crash left half done
  // (tmp/, blobs or rootfs the index does not list) and drops index entries whose files are gone.
  static Result<std::shared_ptr<ImageStore>> Open(ImageStoreOptions options);

  // Progress of a pull, for a PULLING state: bytes of blobs this pull fetches, done and total
  // (0 and 0 when it fetches nothing). Called from the store's threads, a few times a second
  // while bytes move and once at the end with done == total; pulls that wait on another pull
  // of the same reference see that pull's progress.
  using Progress = std::function<void(int64_t bytes_done, int64_t bytes_total)>;

  // Holds an image the store already has, by its manifest digest, without asking a registry:
  // for a task a previous agent process started, re-adopted by a restarted agent. NotFound
  // naming the digest when the store no longer has it.
  Result<ImageLease> Hold(const std::string& manifest_digest);

  Result<ImageLease> Pull(const std::string& reference, const RegistryCredential& credential,
                          const Progress& progress = nullptr);

  // Removes least recently used blobs not in use until the store is within budget minus
  // `headroom`. ResourceExhausted when blobs in use alone exceed it.
  Status Collect(int64_t headroom = 0);

  // Re-hashes every blob; a blob whose content no longer matches its name is removed with the
  // images that need it (they are pulled again when next asked for). Returns the digests removed.
  Result<std::vector<std::string>> Verify();

  ImageStoreStats stats() const;
  std::vector<std::string> BlobDigests() const;
  // Every image held, by manifest digest.
  std::vector<CachedImage> Images() const;
  bool HasImage(const std::string& manifest_digest) const;
  std::string BlobPath(const std::string& digest) const;
  const ImageStoreOptions& options() const { return options_; }

 private:
  struct ImageEntry {
    ImageInfo info;
    std::set<std::string> refs;
    bool with_credential = false;
    int64_t last_used = 0;
  };
  struct BlobEntry {
    int64_t size = 0;
    int64_t last_used = 0;
  };
  struct Resolved;
  struct Flight;
  friend class ImageLease;

  explicit ImageStore(ImageStoreOptions options);
  Status Load();
  Status SaveLocked();  // REQUIRES: mu_ held
  // REQUIRES: mu_ held. May throw nlohmann::json::exception (Load() then starts empty).
  void LoadIndexLocked(const nlohmann::json& state);
  void Unpin(const std::string& manifest_digest);
  Result<ImageLease> PullLeader(const ImageReference& ref, const RegistryCredential& credential,
                                Flight* flight, const Progress& progress);
  Result<Resolved> Resolve(const ImageReference& ref, const RegistryCredential& credential);
  Result<Resolved> ResolveManifest(const ImageReference& ref, const RegistryCredential& credential);
  Status FetchBlobs(const ImageReference& ref, const Resolved& resolved,
                    const RegistryCredential& credential, const std::vector<BlobRef>& missing,
                    Flight* flight, const Progress& progress);
  Status Unpack(const ImageInfo& info, const std::string& manifest_bytes);
  Status EnsureSpace(int64_t needed);
  Status CollectLocked(int64_t target_bytes, std::vector<std::string>* removed_paths);
  void RemoveImageLocked(const std::string& manifest_digest,
                         std::vector<std::string>* removed_paths);
  ImageLease LeaseLocked(const std::string& manifest_digest, bool cache_hit);
  std::string TmpDir(const std::string& prefix);

  const ImageStoreOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  // All below guarded by mu_.
  int64_t tick_ = 0;
  std::map<std::string, ImageEntry> images_;  // manifest digest →
  std::map<std::string, BlobEntry> blobs_;    // digest →
  std::map<std::string, int> pins_;           // manifest digest → leases + pulls
  std::multiset<std::string> pulling_blobs_;  // blobs of images being pulled
  std::set<std::string> fetching_;            // blobs claimed by a pull now
  std::set<std::string> unpacking_;           // manifest digests being stored/unpacked
  std::map<std::string, std::shared_ptr<Flight>> flights_;  // ref + credential key → leader
  struct TagResolution {
    std::string manifest_digest;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, TagResolution> tags_;  // canonical tag reference → (anonymous pulls)
  ImageStoreStats stats_;
};

}  // namespace gpupool::agent::image
