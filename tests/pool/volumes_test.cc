// pool/volumes: what a volume's mount path and a dataset's name may be.
#include "pool/volumes.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(VolumeMountPathTest, AcceptsAbsoluteNormalisedPathsOutsideTheRuntimesMounts) {
  for (const char* ok : {"/data", "/data/imagenet", "/devices", "/system", "/procfs", "/a b"}) {
    EXPECT_TRUE(CheckVolumeMountPath(ok).ok()) << ok;
  }
}

TEST(VolumeMountPathTest, RefusesSayingWhy) {
  struct Case {
    std::string path, message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "must not be empty"},
           {"data", "'data' is not an absolute path"},
           {"/", "'/' is the image's root"},
           {"/data/", "'/data/' ends in '/'"},
           {"//data", "'//data' is not normalised (empty, '.' or '..' part)"},
           {"/a/./b", "'/a/./b' is not normalised (empty, '.' or '..' part)"},
           {"/a/..", "'/a/..' is not normalised (empty, '.' or '..' part)"},
           {"/dev", "'/dev' is under /dev, which the runtime mounts"},
           {"/sys/fs/cgroup", "'/sys/fs/cgroup' is under /sys, which the runtime mounts"},
           {std::string("/a\0b", 4), "contains a NUL byte"},
           {"/" + std::string(1024, 'a'), "longer than 1024 bytes"},
       }) {
    const Status st = CheckVolumeMountPath(c.path);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(st.message(), c.message) << c.path;
  }
}

TEST(DatasetNameTest, AcceptsAndRefuses) {
  for (const char* ok : {"imagenet", "imagenet-1k", "coco.2017", "a_b", "0"}) {
    EXPECT_TRUE(CheckDatasetName(ok).ok()) << ok;
  }
  EXPECT_EQ(CheckDatasetName("").message(), "must not be empty");
  EXPECT_EQ(CheckDatasetName(std::string(64, 'a')).message(), "longer than 63 characters");
  for (const char* bad : {"ImageNet", "-x", ".hidden", "a/b", "a b", "../etc"}) {
    EXPECT_EQ(CheckDatasetName(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace gpupool
