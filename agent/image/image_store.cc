#include "agent/image/image_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "agent/image/digest.h"
#include "agent/image/registry_client.h"
#include "base/log.h"

namespace gpupool::agent::image {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kComponent[] = "image-store";
constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";

std::string Hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("open " + tmp + ": " + strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      if (err == ENOSPC) return Status::ResourceExhausted("full disk: writing " + path);
      return Status::Internal("write " + tmp + ": " + strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp.c_str());
    return Status::Internal("fsync " + tmp + ": " + strerror(errno));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Internal("rename " + tmp + ": " + strerror(errno));
  }
  int dir = open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return Status::Ok();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json BlobJson(const BlobRef& b) { return json{{"digest", b.digest}, {"size", b.size}}; }

Result<BlobRef> BlobFromJson(const json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("digest") || !j["digest"].is_string() || !j.contains("size") ||
      !j["size"].is_number_integer()) {
    return DataLoss(what + ": descriptor without digest and size");
  }
  BlobRef b{j["digest"].get<std::string>(), j["size"].get<int64_t>()};
  if (!IsSha256Digest(b.digest) || b.size < 0) {
    return DataLoss(what + ": unsupported digest '" + b.digest + "'");
  }
  return b;
}

// The manifest as umoci reads it: OCI media types (a Docker v2 schema 2 manifest is the same
// document with other type names; its blobs are byte-identical).
std::string OciManifestFor(const std::string& manifest_bytes) {
  json m = json::parse(manifest_bytes, nullptr, false);
  if (!m.is_object() || !m.contains("config") || !m["config"].is_object()) return manifest_bytes;
  if (m.value("mediaType", "") != kDockerManifest) return manifest_bytes;
  m["mediaType"] = kOciManifest;
  m["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json";
  for (auto& layer : m["layers"]) {
    if (!layer.is_object() || !layer.contains("mediaType") || !layer["mediaType"].is_string()) {
      continue;
    }
    std::string t = layer["mediaType"].get<std::string>();
    if (t == "application/vnd.docker.image.rootfs.diff.tar.gzip") {
      layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip";
    } else if (t == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip") {
      layer["mediaType"] = "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
    }
  }
  return m.dump();
}

}  // namespace

int64_t ImageInfo::bytes() const {
  int64_t total = manifest_size + config.size;
  for (const auto& l : layers) total += l.size;
  return total;
}

// ---- leases ----

ImageLease::ImageLease(ImageLease&& other) noexcept
    : store_(std::move(other.store_)), info_(std::move(other.info_)), cache_hit_(other.cache_hit_) {
  other.store_.reset();
}

ImageLease& ImageLease::operator=(ImageLease&& other) noexcept {
  if (this != &other) {
    if (store_) store_->Unpin(info_.manifest_digest);
    store_ = std::move(other.store_);
    info_ = std::move(other.info_);
    cache_hit_ = other.cache_hit_;
    other.store_.reset();
  }
  return *this;
}

ImageLease::~ImageLease() {
  if (store_) store_->Unpin(info_.manifest_digest);
}

// ---- the store ----

struct ImageStore::Resolved {
  std::string manifest_digest;
  std::string manifest_bytes;
  BlobRef config;
  std::vector<BlobRef> layers;
};

struct ImageStore::Flight {
  bool done = false;
  Status status;
  std::string manifest_digest;
  std::atomic<int64_t> bytes_done{0};
  std::atomic<int64_t> bytes_total{0};
};

ImageStore::ImageStore(ImageStoreOptions options) : options_(std::move(options)) {}

Result<std::shared_ptr<ImageStore>> ImageStore::Open(ImageStoreOptions options) {
  if (options.root.empty() || options.root[0] != '/') {
    return Status::InvalidArgument("image store: root must be an absolute path, got '" +
                                   options.root + "'");
  }
  std::error_code ec;
  for (const char* sub : {"blobs/sha256", "rootfs", "tmp"}) {
    fs::create_directories(fs::path(options.root) / sub, ec);
    if (ec)
      return Status::Internal("image store: mkdir " + options.root + "/" + sub + ": " +
                              ec.message());
  }
  // Tasks in their user namespaces traverse rootfs/ as an unprivileged uid.
  chmod(options.root.c_str(), 0711);
  chmod((options.root + "/rootfs").c_str(), 0711);
  std::shared_ptr<ImageStore> store(new ImageStore(std::move(options)));
  GPUPOOL_RETURN_IF_ERROR(store->Load());
  return store;
}

std::string ImageStore::BlobPath(const std::string& digest) const {
  return options_.root + "/blobs/sha256/" + Hex(digest);
}

std::string ImageStore::TmpDir(const std::string& prefix) {
  static std::atomic<uint64_t> seq{0};
  std::random_device rd;
  std::string dir = options_.root + "/tmp/" + prefix + std::to_string(getpid()) + "-" +
                    std::to_string(seq++) + "-" + std::to_string(rd() % 100000);
  fs::create_directories(dir);
  return dir;
}

Status ImageStore::Load() {
  std::error_code ec;
  // Whatever a crash left half done.
  for (const auto& entry : fs::directory_iterator(options_.root + "/tmp", ec)) {
    fs::remove_all(entry.path(), ec);
  }
  std::string state_path = options_.root + "/state.json";
  std::lock_guard<std::mutex> lock(mu_);
  if (fs::exists(state_path)) {
    // An unreadable index costs the cache, never the node: start empty (everything unlisted is
    // removed below) and pull again.
    json state = json::parse(ReadFile(state_path), nullptr, false);
    std::string problem = state.is_object() ? "" : "not a JSON object";
    if (problem.empty()) {
      try {
        LoadIndexLocked(state);
      } catch (const json::exception& e) {
        problem = e.what();
      }
    }
    if (!problem.empty()) {
      LogWarn(kComponent, "index unreadable; starting with an empty store",
              {{"file", state_path}, {"error", problem}});
      blobs_.clear();
      images_.clear();
      tick_ = 0;
    }
  }
  // Files the index does not list: a crash between a rename and the index write.
  for (const auto& entry : fs::directory_iterator(options_.root + "/blobs/sha256", ec)) {
    std::string digest = "sha256:" + entry.path().filename().string();
    if (!blobs_.count(digest)) fs::remove_all(entry.path(), ec);
  }
  for (const auto& entry : fs::directory_iterator(options_.root + "/rootfs", ec)) {
    std::string digest = "sha256:" + entry.path().filename().string();
    if (!images_.count(digest)) fs::remove_all(entry.path(), ec);
  }
  for (const auto& [digest, b] : blobs_) {
    stats_.stored_bytes += b.size;
  }
  return SaveLocked();
}

void ImageStore::LoadIndexLocked(const json& state) {
  tick_ = state.value("tick", int64_t{0});
  const json blobs = state.value("blobs", json::object());
  const json images = state.value("images", json::object());
  for (const auto& [digest, b] : blobs.items()) {
    if (!IsSha256Digest(digest)) continue;
    struct stat st {};
    std::string path = BlobPath(digest);
    if (stat(path.c_str(), &st) != 0 || st.st_size != b.value("size", int64_t{-1})) {
      LogWarn(kComponent, "dropping blob missing or short on disk", {{"digest", digest}});
      unlink(path.c_str());
      continue;
    }
    blobs_[digest] = BlobEntry{b.value("size", int64_t{0}), b.value("last_used", int64_t{0})};
  }
  for (const auto& [digest, m] : images.items()) {
    if (!IsSha256Digest(digest)) continue;
    ImageEntry e;
    e.info.manifest_digest = digest;
    e.info.manifest_size = m.value("manifest_size", int64_t{0});
    auto config = BlobFromJson(m.value("config", json{}), "state.json " + digest);
    if (!config.ok()) continue;
    e.info.config = *config;
    bool complete = blobs_.count(digest) && blobs_.count(e.info.config.digest);
    const json layers = m.value("layers", json::array());
    for (const auto& l : layers) {
      auto layer = BlobFromJson(l, "state.json " + digest);
      if (!layer.ok()) {
        complete = false;
        break;
      }
      complete = complete && blobs_.count(layer->digest);
      e.info.layers.push_back(*layer);
    }
    e.info.rootfs = options_.root + "/rootfs/" + Hex(digest);
    if (!complete || !fs::is_directory(e.info.rootfs)) {
      LogWarn(kComponent, "dropping incomplete image", {{"digest", digest}});
      continue;
    }
    const json refs = m.value("refs", json::array());
    for (const auto& r : refs) e.refs.insert(r.get<std::string>());
    e.with_credential = m.value("with_credential", false);
    e.last_used = m.value("last_used", int64_t{0});
    e.info.config_json = ReadFile(BlobPath(e.info.config.digest));
    images_[digest] = std::move(e);
  }
}

Status ImageStore::SaveLocked() {
  json state{
      {"version", 1}, {"tick", tick_}, {"blobs", json::object()}, {"images", json::object()}};
  for (const auto& [digest, b] : blobs_) {
    state["blobs"][digest] = json{{"size", b.size}, {"last_used", b.last_used}};
  }
  for (const auto& [digest, e] : images_) {
    json layers = json::array();
    for (const auto& l : e.info.layers) layers.push_back(BlobJson(l));
    state["images"][digest] = json{{"refs", e.refs},
                                   {"with_credential", e.with_credential},
                                   {"last_used", e.last_used},
                                   {"manifest_size", e.info.manifest_size},
                                   {"config", BlobJson(e.info.config)},
                                   {"layers", layers}};
  }
  return WriteFileAtomic(options_.root + "/state.json", state.dump(1));
}

// ---- pulling ----

Result<ImageLease> ImageStore::Pull(const std::string& reference,
                                    const RegistryCredential& credential,
                                    const Progress& progress) {
  GPUPOOL_ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(reference));
  // Same reference, same credential: one leader. The key holds a hash, never the secret.
  std::string key =
      ref.Canonical() + "#" +
      (credential.empty() ? "" : Sha256Hex(credential.username + ":" + credential.password));
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = flights_.find(key);
    if (it != flights_.end()) {
      flight = it->second;
      // The leader's progress, passed on while waiting.
      int64_t seen = -1;
      while (!flight->done) {
        changed_.wait_for(lock, std::chrono::milliseconds(100));
        int64_t done = flight->bytes_done;
        if (progress && done != seen && !flight->done) {
          seen = done;
          lock.unlock();
          progress(done, flight->bytes_total);
          lock.lock();
        }
      }
      if (progress && flight->status.ok()) {
        int64_t total = flight->bytes_total;
        lock.unlock();
        progress(total, total);
        lock.lock();
      }
      if (!flight->status.ok()) return flight->status;
      if (images_.count(flight->manifest_digest)) {
        stats_.pulls++;
        stats_.cache_hits++;
        return LeaseLocked(flight->manifest_digest, true);
      }
      // Collected in between (a tight budget): pull again as a leader below.
    }
    flight = std::make_shared<Flight>();
    flights_[key] = flight;
  }
  Result<ImageLease> result = PullLeader(ref, credential, flight.get(), progress);
  std::lock_guard<std::mutex> lock(mu_);
  flight->done = true;
  flight->status = result.status();
  if (result.ok()) flight->manifest_digest = result->image().manifest_digest;
  auto it = flights_.find(key);
  if (it != flights_.end() && it->second == flight) flights_.erase(it);
  changed_.notify_all();
  return result;
}

Result<ImageStore::Resolved> ImageStore::Resolve(const ImageReference& ref,
                                                 const RegistryCredential& credential) {
  // What a registry sends is outside input: a JSON type error is a bad manifest, not a crash.
  try {
    return ResolveManifest(ref, credential);
  } catch (const json::exception& e) {
    return DataLoss("image " + ref.Canonical() + ": malformed manifest: " + e.what());
  }
}

Result<ImageStore::Resolved> ImageStore::ResolveManifest(const ImageReference& ref,
                                                         const RegistryCredential& credential) {
  RegistryClient client(options_, credential);
  GPUPOOL_ASSIGN_OR_RETURN(std::string bytes, client.InspectRaw(ref, ref.Canonical()));
  std::string digest = "sha256:" + Sha256Hex(bytes);
  if (!ref.digest.empty() && digest != ref.digest) {
    return DataLoss("image " + ref.Canonical() + ": digest mismatch: registry sent a " +
                    "manifest whose sha256 is " + digest);
  }
  json m;
  try {
    m = json::parse(bytes);
  } catch (const json::exception& e) {
    return DataLoss("image " + ref.Canonical() + ": manifest is not JSON");
  }
  if (m.contains("manifests")) {  // an index: this node's platform
    std::string chosen;
    for (const auto& d : m["manifests"]) {
      const json& p = d.value("platform", json::object());
      if (p.value("os", "") == options_.os && p.value("architecture", "") == options_.arch) {
        chosen = d.value("digest", "");
        break;
      }
    }
    if (!IsSha256Digest(chosen)) {
      return Status::NotFound("image " + ref.Canonical() + ": unknown image for " + options_.os +
                              "/" + options_.arch + " (the index lists no such platform)");
    }
    GPUPOOL_ASSIGN_OR_RETURN(bytes, client.InspectRaw(ref, ref.WithDigest(chosen)));
    digest = "sha256:" + Sha256Hex(bytes);
    if (digest != chosen) {
      return DataLoss("image " + ref.Canonical() + ": digest mismatch: manifest " + chosen +
                      " has sha256 " + digest);
    }
    m = json::parse(bytes, nullptr, false);
  }
  if (!m.is_object() || m.value("schemaVersion", 0) != 2 || !m.contains("config") ||
      !m.contains("layers")) {
    return Status::InvalidArgument("image " + ref.Canonical() +
                                   ": not an OCI or Docker v2 schema 2 image manifest");
  }
  Resolved r;
  r.manifest_digest = digest;
  r.manifest_bytes = bytes;
  GPUPOOL_ASSIGN_OR_RETURN(r.config, BlobFromJson(m["config"], "image " + ref.Canonical()));
  for (const auto& l : m["layers"]) {
    GPUPOOL_ASSIGN_OR_RETURN(BlobRef layer, BlobFromJson(l, "image " + ref.Canonical()));
    r.layers.push_back(layer);
  }
  return r;
}

Result<ImageLease> ImageStore::Hold(const std::string& manifest_digest) {
  std::lock_guard<std::mutex> lock(mu_);
  if (images_.find(manifest_digest) == images_.end()) {
    return Status::NotFound("image " + manifest_digest + " is no longer in the node's store");
  }
  return LeaseLocked(manifest_digest, true);
}

ImageLease ImageStore::LeaseLocked(const std::string& manifest_digest, bool cache_hit) {
  ImageEntry& e = images_.at(manifest_digest);
  e.last_used = ++tick_;
  auto touch = [&](const std::string& d) {
    auto b = blobs_.find(d);
    if (b != blobs_.end()) b->second.last_used = tick_;
  };
  touch(manifest_digest);
  touch(e.info.config.digest);
  for (const auto& l : e.info.layers) touch(l.digest);
  pins_[manifest_digest]++;
  ImageLease lease;
  lease.store_ = shared_from_this();
  lease.info_ = e.info;
  lease.cache_hit_ = cache_hit;
  return lease;
}

void ImageStore::Unpin(const std::string& manifest_digest) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pins_.find(manifest_digest);
  if (it != pins_.end() && --it->second <= 0) pins_.erase(it);
  // Used until now: its blobs are as recent as the end of its use.
  auto img = images_.find(manifest_digest);
  if (img != images_.end()) {
    ImageInfo& info = img->second.info;
    img->second.last_used = ++tick_;
    for (const std::string& d : {manifest_digest, info.config.digest}) {
      auto b = blobs_.find(d);
      if (b != blobs_.end()) b->second.last_used = tick_;
    }
    for (const auto& l : info.layers) {
      auto b = blobs_.find(l.digest);
      if (b != blobs_.end()) b->second.last_used = tick_;
    }
  }
  changed_.notify_all();
}

Result<ImageLease> ImageStore::PullLeader(const ImageReference& ref,
                                          const RegistryCredential& credential, Flight* flight,
                                          const Progress& progress) {
  const bool need_registry = !ref.digest.size() || !credential.empty();
  std::string digest = ref.digest;
  {
    ImageLease hit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool trusted = !need_registry;
      if (ref.digest.empty() && credential.empty()) {
        // A tag resolved a moment ago (header comment, "Cache hits").
        auto tag = tags_.find(ref.Canonical());
        if (tag != tags_.end() && std::chrono::steady_clock::now() - tag->second.at <
                                      std::chrono::milliseconds(options_.tag_ttl_ms)) {
          digest = tag->second.manifest_digest;
          trusted = true;
        }
      }
      auto it = images_.find(digest);
      if (trusted && it != images_.end() && !it->second.with_credential) {
        stats_.pulls++;
        stats_.cache_hits++;
        hit = LeaseLocked(digest, true);
      }
    }
    if (hit.store_) {  // callbacks and lease ends run without the lock
      if (progress) progress(0, 0);
      return hit;
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(Resolved resolved, Resolve(ref, credential));
  digest = resolved.manifest_digest;
  if (ref.digest.empty() && credential.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    tags_[ref.Canonical()] = {digest, std::chrono::steady_clock::now()};
  }
  std::vector<BlobRef> wanted = resolved.layers;
  wanted.push_back(resolved.config);
  ImageLease hit;
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return !unpacking_.count(digest); });
    auto it = images_.find(digest);
    if (it != images_.end()) {
      it->second.refs.insert(ref.Canonical());
      it->second.with_credential = it->second.with_credential || !credential.empty();
      stats_.pulls++;
      stats_.cache_hits++;
      hit = LeaseLocked(digest, true);
      Status saved = SaveLocked();  // a new ref; the next save retries if this one fails
      if (!saved.ok()) LogWarn(kComponent, "index not saved", {{"error", saved.message()}});
    } else {
      unpacking_.insert(digest);
      pins_[digest]++;
      for (const auto& b : wanted) pulling_blobs_.insert(b.digest);
    }
  }
  if (hit.store_) {  // callbacks and lease ends run without the lock
    if (progress) progress(0, 0);
    return hit;
  }
  std::vector<BlobRef> claimed;
  auto finish = [&](Status st) -> Status {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& b : claimed) fetching_.erase(b.digest);
    for (const auto& b : wanted) pulling_blobs_.erase(pulling_blobs_.find(b.digest));
    unpacking_.erase(digest);
    if (--pins_[digest] <= 0) pins_.erase(digest);
    changed_.notify_all();
    return st;
  };

  int64_t missing_bytes = static_cast<int64_t>(resolved.manifest_bytes.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& b : wanted) {
      if (!blobs_.count(b.digest)) missing_bytes += b.size;
    }
  }
  Status space = EnsureSpace(missing_bytes);
  if (!space.ok()) {
    return finish(space.WithContext("image " + ref.Canonical()));
  }
  {
    // Claim the missing blobs once no other pull fetches any of them.
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] {
      for (const auto& b : wanted) {
        if (!blobs_.count(b.digest) && fetching_.count(b.digest)) return false;
      }
      return true;
    });
    for (const auto& b : wanted) {
      if (!blobs_.count(b.digest) && !fetching_.count(b.digest)) {
        fetching_.insert(b.digest);
        claimed.push_back(b);
      }
    }
  }
  int64_t claimed_bytes = 0;
  for (const auto& b : claimed) claimed_bytes += b.size;
  flight->bytes_total = claimed_bytes;
  if (!claimed.empty()) {
    Status st = FetchBlobs(ref, resolved, credential, claimed, flight, progress);
    if (!st.ok()) return finish(st);
  }
  flight->bytes_done = claimed_bytes;
  if (progress) progress(claimed_bytes, claimed_bytes);
  // The manifest itself, verified at Resolve.
  Status st = WriteFileAtomic(BlobPath(digest), resolved.manifest_bytes);
  if (!st.ok()) return finish(st);
  ImageInfo info;
  info.manifest_digest = digest;
  info.manifest_size = static_cast<int64_t>(resolved.manifest_bytes.size());
  info.config = resolved.config;
  info.layers = resolved.layers;
  info.rootfs = options_.root + "/rootfs/" + Hex(digest);
  info.config_json = ReadFile(BlobPath(info.config.digest));
  if (!fs::is_directory(info.rootfs)) {
    st = Unpack(info, resolved.manifest_bytes);
    if (!st.ok()) return finish(st.WithContext("image " + ref.Canonical()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!blobs_.count(digest)) {
      blobs_[digest] = BlobEntry{info.manifest_size, 0};
      stats_.stored_bytes += info.manifest_size;
      stats_.blobs_fetched++;
      stats_.bytes_fetched += info.manifest_size;
    }
    ImageEntry e;
    e.info = info;
    e.refs.insert(ref.Canonical());
    e.with_credential = !credential.empty();
    images_[digest] = std::move(e);
    stats_.pulls++;
    if (claimed.empty()) stats_.cache_hits++;
  }
  ImageLease lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = LeaseLocked(digest, claimed.empty());
    st = SaveLocked();
  }
  GPUPOOL_RETURN_IF_ERROR(finish(st));
  LogInfo(kComponent, "image stored",
          {{"image", ref.Canonical()},
           {"digest", digest},
           {"blobs_fetched", std::to_string(claimed.size())}});
  return lease;
}

Status ImageStore::FetchBlobs(const ImageReference& ref, const Resolved& resolved,
                              const RegistryCredential& credential,
                              const std::vector<BlobRef>& missing, Flight* flight,
                              const Progress& progress) {
  std::string staging = TmpDir("pull-");
  auto cleanup = [&] {
    std::error_code ec;
    fs::remove_all(staging, ec);
  };
  std::error_code ec;
  fs::create_directories(staging + "/blobs/sha256", ec);
  Status st = WriteFileAtomic(staging + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  if (!st.ok()) {
    cleanup();
    return st;
  }
  // What the store has already: linked in, so skopeo skips it.
  std::set<std::string> missing_set;
  for (const auto& b : missing) missing_set.insert(b.digest);
  std::vector<BlobRef> all = resolved.layers;
  all.push_back(resolved.config);
  for (const auto& b : all) {
    if (missing_set.count(b.digest)) continue;
    std::string dst = staging + "/blobs/sha256/" + Hex(b.digest);
    if (link(BlobPath(b.digest).c_str(), dst.c_str()) != 0 && errno != EEXIST) {
      cleanup();
      return Status::Internal("link " + BlobPath(b.digest) + ": " + strerror(errno));
    }
  }
  // Bytes done: whatever skopeo has written into the staging layout besides the links.
  std::set<std::string> linked;
  for (const auto& b : all) {
    if (!missing_set.count(b.digest)) linked.insert(Hex(b.digest));
  }
  std::atomic<bool> copying{true};
  std::thread watcher([&] {
    const int64_t total = flight->bytes_total;
    int64_t last = 0;
    while (copying) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int64_t sum = 0;
      std::error_code walk;
      for (auto it = fs::recursive_directory_iterator(staging, walk);
           !walk && it != fs::recursive_directory_iterator(); it.increment(walk)) {
        std::error_code stat;
        if (!it->is_regular_file(stat) || linked.count(it->path().filename().string())) continue;
        int64_t size = static_cast<int64_t>(it->file_size(stat));
        if (!stat) sum += size;
      }
      sum = std::min(sum, total);
      if (sum > last && copying) {
        last = sum;
        flight->bytes_done = sum;
        {
          std::lock_guard<std::mutex> lock(mu_);
          changed_.notify_all();
        }
        if (progress) progress(sum, total);
      }
    }
  });
  RegistryClient client(options_, credential);
  st = client.CopyToLayout(ref, ref.WithDigest(resolved.manifest_digest), staging, "pull");
  copying = false;
  watcher.join();
  if (!st.ok()) {
    cleanup();
    return st;
  }
  // Verify every fetched blob before it becomes visible.
  for (const auto& b : missing) {
    std::string src = staging + "/blobs/sha256/" + Hex(b.digest);
    auto got = Sha256File(src);
    if (!got.ok()) {
      cleanup();
      return DataLoss("image " + ref.Canonical() + ": blob " + b.digest +
                      " missing after the copy: " + got.status().message());
    }
    if ("sha256:" + got->hex != b.digest || got->size != b.size) {
      cleanup();
      return DataLoss("image " + ref.Canonical() + ": digest mismatch: blob " + b.digest +
                      " arrived with sha256:" + got->hex + ", " + std::to_string(got->size) +
                      " bytes (expected " + std::to_string(b.size) + ")");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : missing) {
    std::string src = staging + "/blobs/sha256/" + Hex(b.digest);
    if (rename(src.c_str(), BlobPath(b.digest).c_str()) != 0) {
      int err = errno;
      cleanup();
      return Status::Internal("rename " + src + ": " + strerror(err));
    }
    blobs_[b.digest] = BlobEntry{b.size, ++tick_};
    stats_.stored_bytes += b.size;
    stats_.blobs_fetched++;
    stats_.bytes_fetched += b.size;
  }
  cleanup();
  return Status::Ok();
}

Status ImageStore::Unpack(const ImageInfo& info, const std::string& manifest_bytes) {
  std::string layout = TmpDir("unpack-");
  auto cleanup = [&] {
    std::error_code ec;
    fs::remove_all(layout, ec);
  };
  std::error_code ec;
  fs::create_directories(layout + "/blobs/sha256", ec);
  std::string manifest = OciManifestFor(manifest_bytes);
  std::string manifest_digest = "sha256:" + Sha256Hex(manifest);
  Status st = WriteFileAtomic(layout + "/blobs/sha256/" + Hex(manifest_digest), manifest);
  if (st.ok()) st = WriteFileAtomic(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  json index{
      {"schemaVersion", 2},
      {"manifests",
       json::array({json{{"mediaType", kOciManifest},
                         {"digest", manifest_digest},
                         {"size", manifest.size()},
                         {"annotations", {{"org.opencontainers.image.ref.name", "img"}}}}})}};
  if (st.ok()) st = WriteFileAtomic(layout + "/index.json", index.dump());
  std::vector<BlobRef> blobs = info.layers;
  blobs.push_back(info.config);
  for (const auto& b : blobs) {
    if (!st.ok()) break;
    std::string dst = layout + "/blobs/sha256/" + Hex(b.digest);
    if (link(BlobPath(b.digest).c_str(), dst.c_str()) != 0 && errno != EEXIST) {
      st = Status::Internal("link " + BlobPath(b.digest) + ": " + strerror(errno));
    }
  }
  if (!st.ok()) {
    cleanup();
    return st;
  }
  // As root (the agent), files keep the image's owners; otherwise (a developer's store) they
  // belong to the caller.
  std::vector<std::string> argv = {options_.umoci, "raw",           "unpack",
                                   "--image",      layout + ":img", layout + "/rootfs"};
  if (geteuid() != 0) argv.insert(argv.begin() + 3, "--rootless");
  auto run = RunTool({.argv = argv,
                      .env = {},
                      .pass_fd = -1,
                      .timeout_ms = options_.tool_timeout_ms,
                      .stdout_fd = -1});
  if (!run.ok() || !run->ok()) {
    std::string why = run.ok() ? run->Describe() : run.status().message();
    // umoci may panic on ENOSPC without saying so on its last line: read all of stderr, and
    // ask the file system before the partial tree is removed (less free than the image's
    // compressed size: it filled up).
    struct statvfs vfs {};
    int64_t avail = statvfs(options_.root.c_str(), &vfs) == 0
                        ? static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize)
                        : -1;
    cleanup();
    if ((run.ok() && run->err.find("no space left") != std::string::npos) ||
        (avail >= 0 && avail < info.bytes())) {
      return Status::ResourceExhausted("full disk: unpacking " + info.manifest_digest + " (" +
                                       std::to_string(avail) + " bytes free under " +
                                       options_.root + ")");
    }
    return Status::Internal("umoci unpack " + info.manifest_digest + ": " + why);
  }
  // Mount points the runtime needs, made now: without an overlay (rootfs.h's fallback) the
  // runtime could not create them in a rootfs it may not write.
  for (const char* d : {"proc", "sys", "dev", "tmp"}) {
    std::error_code mk;
    fs::create_directories(layout + "/rootfs/" + d, mk);
  }
  chmod((layout + "/rootfs").c_str(), 0755);
  if (rename((layout + "/rootfs").c_str(), info.rootfs.c_str()) != 0) {
    int err = errno;
    cleanup();
    return Status::Internal("rename rootfs to " + info.rootfs + ": " + strerror(err));
  }
  cleanup();
  return Status::Ok();
}

// ---- budget ----

Status ImageStore::EnsureSpace(int64_t needed) {
  std::vector<std::string> removed;
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.budget_bytes > 0 && stats_.stored_bytes + needed > options_.budget_bytes) {
      st = CollectLocked(options_.budget_bytes - needed, &removed);
    }
  }
  for (const auto& p : removed) fs::remove_all(p);
  GPUPOOL_RETURN_IF_ERROR(st);
  struct statvfs vfs {};
  if (statvfs(options_.root.c_str(), &vfs) != 0) return Status::Ok();
  int64_t avail = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  int64_t short_by = needed + options_.min_free_bytes - avail;
  if (short_by <= 0) return Status::Ok();
  removed.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    st = CollectLocked(stats_.stored_bytes - short_by, &removed);
  }
  for (const auto& p : removed) fs::remove_all(p);
  if (!st.ok()) {
    return Status::ResourceExhausted("full disk: need " + std::to_string(needed) + " bytes (+" +
                                     std::to_string(options_.min_free_bytes) + " kept free), " +
                                     std::to_string(avail) + " available under " + options_.root);
  }
  return Status::Ok();
}

Status ImageStore::Collect(int64_t headroom) {
  std::vector<std::string> removed;
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.budget_bytes <= 0) return Status::Ok();
    st = CollectLocked(options_.budget_bytes - headroom, &removed);
  }
  for (const auto& p : removed) fs::remove_all(p);
  return st;
}

Status ImageStore::CollectLocked(int64_t target_bytes, std::vector<std::string>* removed_paths) {
  if (stats_.stored_bytes <= target_bytes) return Status::Ok();
  std::set<std::string> in_use(pulling_blobs_.begin(), pulling_blobs_.end());
  in_use.insert(fetching_.begin(), fetching_.end());
  for (const auto& [digest, n] : pins_) {
    in_use.insert(digest);
    auto it = images_.find(digest);
    if (it == images_.end()) continue;
    in_use.insert(it->second.info.config.digest);
    for (const auto& l : it->second.info.layers) in_use.insert(l.digest);
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [digest, b] : blobs_) {
    if (!in_use.count(digest)) order.emplace_back(b.last_used, digest);
  }
  std::sort(order.begin(), order.end());
  bool changed = false;
  for (const auto& [used, digest] : order) {
    if (stats_.stored_bytes <= target_bytes) break;
    if (!blobs_.count(digest)) continue;  // went with an image already
    // Images that need this blob go with it.
    std::vector<std::string> users;
    for (const auto& [m, e] : images_) {
      bool uses = m == digest || e.info.config.digest == digest;
      for (const auto& l : e.info.layers) uses = uses || l.digest == digest;
      if (uses) users.push_back(m);
    }
    for (const auto& m : users) RemoveImageLocked(m, removed_paths);
    auto it = blobs_.find(digest);
    if (it != blobs_.end()) {
      stats_.stored_bytes -= it->second.size;
      stats_.blobs_collected++;
      unlink(BlobPath(digest).c_str());
      blobs_.erase(it);
    }
    changed = true;
  }
  if (changed) GPUPOOL_RETURN_IF_ERROR(SaveLocked());
  if (stats_.stored_bytes > target_bytes) {
    int64_t in_use_bytes = 0;
    for (const auto& d : in_use) {
      auto it = blobs_.find(d);
      if (it != blobs_.end()) in_use_bytes += it->second.size;
    }
    return Status::ResourceExhausted(
        "image store budget: " + std::to_string(stats_.stored_bytes) + " bytes stored, " +
        std::to_string(in_use_bytes) + " of them in use by tasks or pulls; room needed leaves " +
        std::to_string(std::max<int64_t>(target_bytes, 0)) + " bytes (budget " +
        std::to_string(options_.budget_bytes) + ")");
  }
  return Status::Ok();
}

void ImageStore::RemoveImageLocked(const std::string& manifest_digest,
                                   std::vector<std::string>* removed_paths) {
  auto it = images_.find(manifest_digest);
  if (it == images_.end()) return;
  // Out of the way at once (a new pull may unpack the same image), deleted outside the lock.
  std::string trash = TmpDir("trash-");
  if (rename(it->second.info.rootfs.c_str(), (trash + "/rootfs").c_str()) != 0) {
    LogWarn(kComponent, "cannot move rootfs away",
            {{"rootfs", it->second.info.rootfs}, {"error", strerror(errno)}});
  }
  removed_paths->push_back(trash);
  images_.erase(it);
  auto blob = blobs_.find(manifest_digest);
  if (blob != blobs_.end()) {
    stats_.stored_bytes -= blob->second.size;
    unlink(BlobPath(manifest_digest).c_str());
    blobs_.erase(blob);
  }
}

Result<std::vector<std::string>> ImageStore::Verify() {
  std::vector<std::string> digests;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [d, b] : blobs_) digests.push_back(d);
  }
  std::vector<std::string> bad;
  for (const auto& d : digests) {
    auto got = Sha256File(BlobPath(d));
    if (!got.ok() || "sha256:" + got->hex != d) bad.push_back(d);
  }
  std::vector<std::string> removed_paths;
  std::vector<std::string> removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& d : bad) {
      bool pinned = false;
      std::vector<std::string> users;
      for (const auto& [m, e] : images_) {
        bool uses = m == d || e.info.config.digest == d;
        for (const auto& l : e.info.layers) uses = uses || l.digest == d;
        if (!uses) continue;
        users.push_back(m);
        pinned = pinned || pins_.count(m);
      }
      if (pinned) continue;  // in use: checked again next time
      for (const auto& m : users) RemoveImageLocked(m, &removed_paths);
      auto it = blobs_.find(d);
      if (it != blobs_.end()) {
        stats_.stored_bytes -= it->second.size;
        unlink(BlobPath(d).c_str());
        blobs_.erase(it);
      }
      LogWarn(kComponent, "blob failed its digest check; removed", {{"digest", d}});
      removed.push_back(d);
    }
    if (!removed.empty()) GPUPOOL_RETURN_IF_ERROR(SaveLocked());
  }
  for (const auto& p : removed_paths) fs::remove_all(p);
  return removed;
}

ImageStoreStats ImageStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ImageStoreStats s = stats_;
  s.blobs = static_cast<int64_t>(blobs_.size());
  s.images = static_cast<int64_t>(images_.size());
  return s;
}

std::vector<std::string> ImageStore::BlobDigests() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [d, b] : blobs_) out.push_back(d);
  return out;
}

std::vector<CachedImage> ImageStore::Images() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CachedImage> out;
  for (const auto& [digest, e] : images_) {
    out.push_back({digest, {e.refs.begin(), e.refs.end()}, e.info.layers});
  }
  return out;
}

bool ImageStore::HasImage(const std::string& manifest_digest) const {
  std::lock_guard<std::mutex> lock(mu_);
  return images_.count(manifest_digest) > 0;
}

}  // namespace gpupool::agent::image
