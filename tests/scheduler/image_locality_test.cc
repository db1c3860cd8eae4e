// Placement by cached layers (issue 25): ImageLocality's book of which nodes hold which layers,
// and the core placing an image task on a node that holds its image when packing allows.
#include "scheduler/image_locality.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

const std::string kBase = "sha256:" + std::string(64, 'b');
const std::string kApp = "sha256:" + std::string(64, 'a');
const std::string kOther = "sha256:" + std::string(64, 'c');

NodeImage App() {
  return {"sha256:" + std::string(64, 'e'),
          {"registry.local:5000/team/app:1"},
          {{kBase, 700 << 20}, {kApp, 50 << 20}}};
}
NodeImage BaseOnly() {
  return {"sha256:" + std::string(64, 'f'),
          {"registry.local:5000/team/tool:1"},
          {{kBase, 700 << 20}, {kOther, 5 << 20}}};
}

std::map<std::string, int64_t> AsMap(const std::vector<placement::WarmNode>& warm) {
  std::map<std::string, int64_t> out;
  for (const auto& w : warm) out[w.node] = w.missing_bytes;
  return out;
}

TEST(ImageLocalityTest, NodesMissingFewerBytesOfTheImageAreWarm) {
  ImageLocality book;
  book.Report("full", {App()});
  book.Report("base", {BaseOnly()});
  book.Report("cold", {});
  // The image's layers come from the node that holds it; a node with its base misses the rest.
  EXPECT_EQ(AsMap(book.WarmFor("registry.local:5000/team/app:1")),
            (std::map<std::string, int64_t>{{"full", 0}, {"base", 50 << 20}}));
  // An image no node holds (its layers unknown), a reference that does not parse: nothing.
  EXPECT_TRUE(book.WarmFor("registry.local:5000/team/app:2").empty());
  EXPECT_TRUE(book.WarmFor("Not A Reference").empty());
  // A report replaces the node's last one; a forgotten node is warm no more.
  book.Report("full", {BaseOnly()});
  EXPECT_EQ(AsMap(book.WarmFor("registry.local:5000/team/tool:1")),
            (std::map<std::string, int64_t>{{"full", 0}, {"base", 0}}));
  EXPECT_TRUE(book.WarmFor("registry.local:5000/team/app:1").empty());
  book.Forget("base");
  book.Forget("full");
  EXPECT_EQ(book.nodes(), 0u);
  EXPECT_TRUE(book.WarmFor("registry.local:5000/team/tool:1").empty());
}

TEST(ImageLocalityTest, ReferencesAreComparedInCanonicalForm) {
  ImageLocality book;
  NodeImage busybox{
      "sha256:" + std::string(64, 'd'), {"docker.io/library/busybox:latest"}, {{kBase, 1 << 20}}};
  book.Report("n", {busybox});
  for (const char* ref : {"busybox", "busybox:latest", "docker.io/library/busybox"}) {
    EXPECT_EQ(AsMap(book.WarmFor(ref)), (std::map<std::string, int64_t>{{"n", 0}})) << ref;
  }
}

// The core: two idle identical nodes, the second holding the image. An image task goes there
// (packing cannot tell them apart); a plain task goes to the first as before; once the warm node
// is busier, packing wins again and the image task goes where it packs best.
TEST(ImageLocalityTest, TheCorePlacesAnImageTaskOnANodeThatHoldsItsImage) {
  auto h = std::make_unique<CoreHarness>(SchedulerOptions::Defaults(), MemoryStore().database());
  ASSERT_TRUE(h->CreatePool("imgs", SharingMode::kFractional, "best-fit").ok());
  ASSERT_TRUE(h->Register("first", "imgs", 2).ok());
  ASSERT_TRUE(h->Register("second", "imgs", 2).ok());
  h->core->OnNodeImages("second", {App()});
  h->core->OnNodeImages("unknown-node", {App()});  // ignored: the core does not know it

  JobSpec image = CoreHarness::Whole("imgs", 1);
  image.task_template.image = "registry.local:5000/team/app:1";
  auto warm = h->Submit(image);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_EQ(h->Task(warm->id).node, "second");
  h->Report("second", warm->id, 0, TaskState::kSucceeded);

  auto plain = h->Submit(CoreHarness::Whole("imgs", 1));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(h->Task(plain->id).node, "first");
  // "first" now has one GPU busy: best-fit packs the next task there, warm node or not.
  auto packed = h->Submit(image);
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(h->Task(packed->id).node, "first");
}

}  // namespace
}  // namespace gpupool
