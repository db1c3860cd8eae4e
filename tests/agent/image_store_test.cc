// The node's image store against a real registry (docker-registry on loopback) with images
// built here from local files: pulls are verified by digest, a tampered blob is refused and
// leaves nothing behind, 20 concurrent pulls of a new image fetch each layer once (counted in
// the registry's own access log), the budget collects least recently used layers but never one
// in use, the store survives a restart (served with the registry stopped), and each failure
// names its cause: unknown image, refused credential, registry down, budget.
#include "agent/image/image_store.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "agent/image/digest.h"
#include "agent/image/image_pins.h"
#include "tests/agent/oci_registry.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent::image {
namespace {

namespace fs = std::filesystem;
using testing::BuildAndPush;
using testing::BusyboxLayer;
using testing::LocalRegistry;
using testing::TestLayer;

// bcrypt (cost 4) of "s3cret", for the registry's htpasswd file.
constexpr char kBcryptS3cret[] = "$2b$04$ax8.W/eQ7R/xmzfReiQmeumJMVzO..JZcrtiCzfUPrgKAaxILgP/q";

// A layer of `bytes` random bytes: content no other image shares.
TestLayer RandomLayer(const std::string& path, size_t bytes, unsigned seed) {
  std::mt19937 gen(seed);
  std::string data(bytes, '\0');
  for (auto& c : data) c = static_cast<char>(gen());
  TestLayer layer;
  layer.files[path] = data;
  return layer;
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = registry_.Start();
    if (!st.ok()) GTEST_SKIP() << "no local registry: " << st.message();
    work_ = testing::MakeScratchDir("/tmp/gpupool-imgwork-");
    root_ = testing::MakeScratchDir("/tmp/gpupool-imgstore-");
  }
  void TearDown() override {
    std::error_code ec;
    if (!work_.empty()) fs::remove_all(work_, ec);
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  ImageStoreOptions Options() {
    ImageStoreOptions o;
    o.root = root_;
    o.tls_verify = false;
    o.pull_attempts = 2;
    o.backoff_ms = 20;
    return o;
  }
  std::shared_ptr<ImageStore> Open(ImageStoreOptions o) {
    auto store = ImageStore::Open(std::move(o));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? *store : nullptr;
  }
  std::string Ref(const std::string& repo_tag) { return registry_.host() + "/" + repo_tag; }
  // The bytes one image of `repo_tag` takes in a store, measured in a scratch store of its own.
  int64_t ImageBytes(const std::string& repo_tag) {
    auto o = Options();
    o.root = testing::MakeScratchDir("/tmp/gpupool-imgmeasure-");
    int64_t bytes = 0;
    {
      auto s = Open(o);
      auto l = s->Pull(Ref(repo_tag), {});
      EXPECT_TRUE(l.ok()) << l.status().ToString();
      if (l.ok()) bytes = l->image().bytes();
    }
    fs::remove_all(o.root);
    return bytes;
  }
  bool TmpEmpty() { return fs::is_empty(root_ + "/tmp"); }

  LocalRegistry registry_;
  std::string work_, root_;
};

TEST_F(ImageStoreTest, PullStoresVerifiedBlobsAndUnpacksTheRootfs) {
  auto digest = BuildAndPush(registry_, work_, "test/busybox", "1",
                             {BusyboxLayer(), RandomLayer("/data/blob", 4096, 1)});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  auto store = Open(Options());
  std::vector<std::pair<int64_t, int64_t>> progress;
  auto lease = store->Pull(Ref("test/busybox:1"), {}, [&](int64_t done, int64_t total) {
    progress.emplace_back(done, total);
  });
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  const ImageInfo& info = lease->image();
  // Progress ends at the bytes of the blobs fetched (layers and config), never going back.
  ASSERT_FALSE(progress.empty());
  const int64_t fetched = info.bytes() - info.manifest_size;
  EXPECT_EQ(progress.back(), std::make_pair(fetched, fetched));
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_LE(progress[i - 1].first, progress[i].first);
  EXPECT_EQ(info.manifest_digest, *digest);
  EXPECT_FALSE(lease->cache_hit());
  ASSERT_EQ(info.layers.size(), 2u);
  for (const BlobRef& b : info.layers) {
    auto got = Sha256File(store->BlobPath(b.digest));
    ASSERT_TRUE(got.ok());
    EXPECT_EQ("sha256:" + got->hex, b.digest);
    EXPECT_EQ(got->size, b.size);
  }
  EXPECT_TRUE(fs::exists(info.rootfs + "/bin/busybox"));
  EXPECT_EQ(fs::file_size(info.rootfs + "/data/blob"), 4096u);
  EXPECT_NE(info.config_json.find("/bin/sh"), std::string::npos);
  EXPECT_TRUE(TmpEmpty());

  // By digest: the same image, no blob fetched again.
  auto again = store->Pull(Ref("test/busybox@" + *digest), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->cache_hit());
  for (const BlobRef& b : info.layers) EXPECT_EQ(registry_.BlobGets(b.digest), 1) << b.digest;
}

TEST_F(ImageStoreTest, TamperedBlobIsRefusedAndNothingHalfWrittenStays) {
  auto good = BuildAndPush(registry_, work_, "test/good", "1", {BusyboxLayer()});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  auto digest = BuildAndPush(registry_, work_, "test/tampered", "1", {RandomLayer("/x", 8192, 2)});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  auto store = Open(Options());
  auto kept = store->Pull(Ref("test/good:1"), {});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  std::vector<std::string> before = store->BlobDigests();

  // Find the tampered image's layer and flip its bytes in the registry's storage (same length).
  auto probe = ImageStore::Open([&] {
    auto o = Options();
    o.root = testing::MakeScratchDir("/tmp/gpupool-imgprobe-");
    return o;
  }());
  ASSERT_TRUE(probe.ok());
  auto clean = (*probe)->Pull(Ref("test/tampered:1"), {});
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  std::string layer = clean->image().layers.at(0).digest;
  std::string probe_root = (*probe)->options().root;
  clean = ImageLease();
  probe->reset();
  fs::remove_all(probe_root);
  std::string data = testing::ReadWholeFile(registry_.BlobDataPath(layer));
  ASSERT_FALSE(data.empty());
  for (size_t i = data.size() / 2; i < data.size() / 2 + 16; ++i)
    data[i] = static_cast<char>(~data[i]);
  std::ofstream(registry_.BlobDataPath(layer), std::ios::binary | std::ios::trunc) << data;

  auto pulled = store->Pull(Ref("test/tampered:1"), {});
  ASSERT_FALSE(pulled.ok());
  EXPECT_EQ(pulled.status().code(), StatusCode::kDataLoss) << pulled.status().ToString();
  EXPECT_NE(pulled.status().message().find("digest"), std::string::npos)
      << pulled.status().message();
  EXPECT_FALSE(fs::exists(store->BlobPath(layer)));
  EXPECT_TRUE(TmpEmpty());
  EXPECT_EQ(store->BlobDigests(), before);  // the other image is untouched
  EXPECT_TRUE(fs::exists(kept->image().rootfs + "/bin/busybox"));
}

TEST_F(ImageStoreTest, StoredBlobCorruptedOnDiskIsFoundByVerifyAndPulledAgain) {
  auto digest = BuildAndPush(registry_, work_, "test/v", "1", {RandomLayer("/y", 4096, 3)});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  auto store = Open(Options());
  std::string layer;
  {
    auto lease = store->Pull(Ref("test/v:1"), {});
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    layer = lease->image().layers.at(0).digest;
  }
  std::ofstream(store->BlobPath(layer), std::ios::binary | std::ios::app) << "x";
  auto removed = store->Verify();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, std::vector<std::string>{layer});
  EXPECT_FALSE(store->HasImage(*digest));
  auto again = store->Pull(Ref("test/v:1"), {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(registry_.BlobGets(layer), 2);
}

TEST_F(ImageStoreTest, TwentyConcurrentPullsFetchEachLayerOnce) {
  auto base = BuildAndPush(
      registry_, work_, "test/many", "1",
      {BusyboxLayer(), RandomLayer("/a", 64 * 1024, 4), RandomLayer("/b", 64 * 1024, 5)});
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  // A second image sharing the busybox layer, pulled at the same time under another name.
  auto other = BuildAndPush(registry_, work_, "test/other", "1",
                            {BusyboxLayer(), RandomLayer("/c", 1024, 6)});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto store = Open(Options());
  std::vector<Result<ImageLease>> results;
  results.reserve(22);
  for (int i = 0; i < 22; ++i) results.emplace_back(Status::Internal("not run"));
  std::vector<std::vector<std::pair<int64_t, int64_t>>> progress(22);
  std::vector<std::thread> threads;
  for (int i = 0; i < 22; ++i) {
    threads.emplace_back([&, i] {
      results[i] = store->Pull(
          Ref(i < 20 ? "test/many:1" : "test/other:1"), {},
          [&, i](int64_t done, int64_t total) { progress[i].emplace_back(done, total); });
    });
  }
  for (auto& t : threads) t.join();
  // Every task of the image saw the one pull's progress to its end (a thread that started only
  // after that pull had finished would see a cache hit: 0 of 0).
  std::pair<int64_t, int64_t> fetched{0, 0};
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(progress[i].empty()) << i;
    fetched = std::max(fetched, progress[i].back());
  }
  EXPECT_GT(fetched.second, 0);
  EXPECT_EQ(fetched.first, fetched.second);
  for (int i = 0; i < 20; ++i) {
    if (progress[i].back() != std::make_pair(int64_t{0}, int64_t{0})) {
      EXPECT_EQ(progress[i].back(), fetched) << i;
    }
  }
  for (int i = 0; i < 22; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_EQ(results[i]->image().manifest_digest, i < 20 ? *base : *other);
  }
  const ImageInfo& info = results[0]->image();
  for (const BlobRef& b : info.layers) {
    EXPECT_EQ(registry_.BlobGets(b.digest), 1) << "layer " << b.digest;
  }
  EXPECT_EQ(registry_.BlobGets(info.config.digest), 1);
  for (const BlobRef& b : results[21]->image().layers) {
    EXPECT_EQ(registry_.BlobGets(b.digest), 1) << "layer " << b.digest;
  }
  // The busybox layer is the same blob in both (the builds fix file times).
  EXPECT_EQ(results[21]->image().layers[0].digest, info.layers[0].digest);
  // 3 + 1 distinct layers, 2 configs, 2 manifests.
  EXPECT_EQ(store->stats().blobs_fetched, 8)
      << store->stats().blobs << " blobs stored, " << store->stats().cache_hits << " cache hits";
  EXPECT_TRUE(TmpEmpty());
}

TEST_F(ImageStoreTest, BudgetCollectsLeastRecentlyUsedLayersButNeverOneInUse) {
  std::vector<std::string> digests;
  for (int i = 0; i < 3; ++i) {
    auto d = BuildAndPush(registry_, work_, "test/gc" + std::to_string(i), "1",
                          {RandomLayer("/payload", 100 * 1024, 10 + i)});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    digests.push_back(*d);
  }
  // Measure one image, then allow a little over two of them.
  const int64_t one = ImageBytes("test/gc0:1");
  ASSERT_GT(one, 0);
  auto o = Options();
  o.budget_bytes = one * 2 + one / 2;
  auto store = Open(o);
  auto held = store->Pull(Ref("test/gc0:1"), {});  // oldest, but in use throughout
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  {
    auto l1 = store->Pull(Ref("test/gc1:1"), {});
    ASSERT_TRUE(l1.ok()) << l1.status().ToString();
  }
  auto l2 = store->Pull(Ref("test/gc2:1"), {});
  ASSERT_TRUE(l2.ok()) << l2.status().ToString();
  EXPECT_TRUE(store->HasImage(digests[0])) << "in use: kept although least recently used";
  EXPECT_FALSE(store->HasImage(digests[1])) << "unused and least recently used: collected";
  EXPECT_TRUE(store->HasImage(digests[2]));
  EXPECT_TRUE(fs::exists(held->image().rootfs));
  EXPECT_LE(store->stats().stored_bytes, o.budget_bytes);
  EXPECT_GE(store->stats().blobs_collected, 1);

  // Both remaining images in use: a third cannot fit, and the error says why.
  auto refused = store->Pull(Ref("test/gc1:1"), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("budget"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("in use"), std::string::npos);
  EXPECT_TRUE(store->HasImage(digests[0]));
  EXPECT_TRUE(store->HasImage(digests[2]));
  EXPECT_TRUE(TmpEmpty());
}

// A pool's pinned images (docs/images.md, "Prepull and pins"): pulled ahead of any task, held out
// of the budget's collection while pinned (where an unpinned image of the same age goes), and
// let go when unpinned; one the registry lacks is retried with back-off and says why.
TEST_F(ImageStoreTest, PinnedImagesArePulledAheadAndNeverCollectedWhilePinned) {
  std::vector<std::string> digests;
  for (int i = 0; i < 3; ++i) {
    auto d = BuildAndPush(registry_, work_, "test/pin" + std::to_string(i), "1",
                          {RandomLayer("/payload", 100 * 1024, 40 + i)});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    digests.push_back(*d);
  }
  const int64_t one = ImageBytes("test/pin0:1");
  ASSERT_GT(one, 0);
  auto o = Options();
  o.budget_bytes = one * 2 + one / 2;  // room for two of the three
  auto store = Open(o);
  const size_t log_from = registry_.LogBytes();
  ImagePins pins(store, /*retry_scale=*/0.01);
  pins.Set({Ref("test/pin0:1"), Ref("test/missing:1")});
  // The pinned image arrives with no task asking for it; the missing one keeps failing.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto s = pins.State();
        return s.size() == 2 && s[0].held && s[1].failures >= 2;
      },
      std::chrono::seconds(60)));
  std::vector<ImagePins::Pin> state = pins.State();
  EXPECT_EQ(state[0].manifest_digest, digests[0]);
  EXPECT_TRUE(store->HasImage(digests[0]));
  EXPECT_GE(registry_.BlobGets(store->Images()[0].layers[0].digest, log_from), 1);
  EXPECT_FALSE(state[1].held);
  EXPECT_NE(state[1].error.find("unknown image"), std::string::npos) << state[1].error;
  EXPECT_FALSE(pins.WaitAllHeld(std::chrono::milliseconds(10)));

  // Two more images through tasks: the budget collects the older of them, never the pinned one
  // (least recently used of all).
  { ASSERT_TRUE(store->Pull(Ref("test/pin1:1"), {}).ok()); }
  { ASSERT_TRUE(store->Pull(Ref("test/pin2:1"), {}).ok()); }
  EXPECT_TRUE(store->HasImage(digests[0])) << "pinned: kept although least recently used";
  EXPECT_FALSE(store->HasImage(digests[1])) << "unpinned and least recently used: collected";
  EXPECT_TRUE(store->HasImage(digests[2]));

  // Not even a collection down to nothing takes a pinned image; unpinned, it goes like any other.
  EXPECT_EQ(store->Collect(o.budget_bytes).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(store->HasImage(digests[0]));
  EXPECT_FALSE(store->HasImage(digests[2]));
  pins.Set({});
  EXPECT_TRUE(pins.State().empty());
  EXPECT_TRUE(pins.WaitAllHeld(std::chrono::milliseconds(10)));
  EXPECT_TRUE(store->Collect(o.budget_bytes).ok());
  EXPECT_FALSE(store->HasImage(digests[0])) << "unpinned: collected";
  EXPECT_TRUE(TmpEmpty());
}

TEST_F(ImageStoreTest, RestartKeepsTheStoreAndDropsWhatACrashLeft) {
  auto digest = BuildAndPush(registry_, work_, "test/keep", "1", {BusyboxLayer()});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  std::string rootfs;
  {
    auto store = Open(Options());
    auto lease = store->Pull(Ref("test/keep:1"), {});
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    rootfs = lease->image().rootfs;
  }
  // A crash mid-pull: a half-written file in tmp/ and a blob the index never recorded.
  fs::create_directories(root_ + "/tmp/pull-dead/blobs/sha256");
  std::ofstream(root_ + "/tmp/pull-dead/blobs/sha256/partial") << "half";
  std::string stray = root_ + "/blobs/sha256/" + std::string(64, 'e');
  std::ofstream(stray) << "stray";
  registry_.Stop();  // everything below is served by the store alone

  auto store = Open(Options());
  EXPECT_TRUE(store->HasImage(*digest));
  EXPECT_TRUE(TmpEmpty());
  EXPECT_FALSE(fs::exists(stray));
  auto lease = store->Pull(Ref("test/keep@" + *digest), {});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(lease->cache_hit());
  EXPECT_EQ(lease->image().rootfs, rootfs);
  EXPECT_TRUE(fs::exists(rootfs + "/bin/busybox"));
  lease = ImageLease();
  store.reset();

  // An index that cannot be read costs the cache, not the node: the store opens empty.
  std::ofstream(root_ + "/state.json", std::ios::trunc)
      << R"({"blobs": {"sha256:)" << std::string(64, 'a') << R"(": 5}})";
  store = Open(Options());
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->HasImage(*digest));
  EXPECT_TRUE(store->BlobDigests().empty());
  EXPECT_TRUE(fs::is_empty(root_ + "/rootfs"));
}

TEST_F(ImageStoreTest, FailuresNameTheirCause) {
  auto store = Open(Options());
  auto unknown = store->Pull(Ref("test/nothing:1"), {});
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound) << unknown.status().ToString();
  EXPECT_NE(unknown.status().message().find("unknown image"), std::string::npos);

  auto bad_digest = store->Pull(Ref("test/nothing@sha256:" + std::string(64, '0')), {});
  EXPECT_EQ(bad_digest.status().code(), StatusCode::kNotFound) << bad_digest.status().ToString();

  auto malformed = store->Pull("Bad Ref", {});
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);

  std::string host = registry_.host();
  registry_.Stop();
  auto down = store->Pull(host + "/test/anything:1", {});
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
  EXPECT_NE(down.status().message().find("registry down"), std::string::npos);
  EXPECT_NE(down.status().message().find("after 2 attempts"), std::string::npos);
  EXPECT_TRUE(TmpEmpty());
}

TEST_F(ImageStoreTest, FullDiskIsNamedAndLeavesNothingHalfWritten) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs as the full disk";
  auto small = BuildAndPush(registry_, work_, "test/small", "1", {RandomLayer("/s", 1024, 20)});
  auto medium =
      BuildAndPush(registry_, work_, "test/medium", "1", {RandomLayer("/m", 2560 * 1024, 21)});
  auto big = BuildAndPush(registry_, work_, "test/big", "1", {RandomLayer("/b", 6 << 20, 22)});
  ASSERT_TRUE(small.ok() && medium.ok() && big.ok());
  std::string disk = testing::MakeScratchDir("/tmp/gpupool-fulldisk-");
  ASSERT_EQ(mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=4m"), 0) << strerror(errno);
  {
    auto o = Options();
    o.root = disk + "/store";
    auto store = Open(o);
    ASSERT_TRUE(store);
    auto kept = store->Pull(Ref("test/small:1"), {});
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();

    // Larger than the disk: refused before a byte is fetched.
    auto refused = store->Pull(Ref("test/big:1"), {});
    EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("full disk"), std::string::npos)
        << refused.status().message();
    // Its blob fits, its unpacked files do not: the disk fills while unpacking.
    auto filled = store->Pull(Ref("test/medium:1"), {});
    EXPECT_EQ(filled.status().code(), StatusCode::kResourceExhausted) << filled.status().ToString();
    EXPECT_NE(filled.status().message().find("full disk"), std::string::npos)
        << filled.status().message();
    EXPECT_FALSE(store->HasImage(*medium));
    EXPECT_FALSE(store->HasImage(*big));
    EXPECT_TRUE(fs::is_empty(o.root + "/tmp"));
    // The image already there is untouched and still served.
    EXPECT_TRUE(fs::exists(kept->image().rootfs + "/s"));
    auto again = store->Pull(Ref("test/small@" + *small), {});
    EXPECT_TRUE(again.ok()) << again.status().ToString();
  }
  umount2(disk.c_str(), MNT_DETACH);
  fs::remove_all(disk);
}

TEST_F(ImageStoreTest, CredentialsArePassedPerPullAndNeverStored) {
  registry_.Stop();
  LocalRegistry secured;
  Status st = secured.Start("tenant-a", kBcryptS3cret);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto digest = BuildAndPush(secured, work_, "private/app", "1", {RandomLayer("/p", 2048, 7)},
                             {"/bin/sh"}, "tenant-a", "s3cret");
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  auto store = Open(Options());
  std::string ref = secured.host() + "/private/app:1";

  auto anonymous = store->Pull(ref, {});
  EXPECT_EQ(anonymous.status().code(), StatusCode::kPermissionDenied)
      << anonymous.status().ToString();
  EXPECT_NE(anonymous.status().message().find("refused the credential"), std::string::npos);
  auto wrong = store->Pull(ref, {"tenant-a", "guess"});
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied) << wrong.status().ToString();
  EXPECT_EQ(wrong.status().message().find("guess"), std::string::npos);

  auto lease = store->Pull(ref, {"tenant-a", "s3cret"});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  // Cached now, yet a caller without the credential is still asked for it by the registry.
  auto by_digest = store->Pull(secured.host() + "/private/app@" + *digest, {});
  EXPECT_EQ(by_digest.status().code(), StatusCode::kPermissionDenied)
      << by_digest.status().ToString();

  // Nothing under the store holds the password, in clear or base64 ("tenant-a:s3cret").
  for (const auto& entry : fs::recursive_directory_iterator(root_)) {
    if (!entry.is_regular_file()) continue;
    std::string content = testing::ReadWholeFile(entry.path());
    EXPECT_EQ(content.find("s3cret"), std::string::npos) << entry.path();
    EXPECT_EQ(content.find("dGVuYW50LWE6czNjcmV0"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace gpupool::agent::image
