// ImageReference: what a tenant may write in a job's `image`, and how a bad one is named.
#include "pool/image_reference.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

TEST(ImageReferenceTest, ParsesAndNamesTheBadPart) {
  auto r = ParseImageReference("busybox");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Canonical(), "docker.io/library/busybox:latest");
  r = ParseImageReference("127.0.0.1:5000/team/app:v1.2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->registry, "127.0.0.1:5000");
  EXPECT_EQ(r->repository, "team/app");
  EXPECT_EQ(r->tag, "v1.2");
  std::string d = "sha256:" + std::string(64, 'a');
  r = ParseImageReference("localhost/app@" + d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Canonical(), "localhost/app@" + d);
  auto bad = ParseImageReference("Team/App");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("repository"), std::string::npos);
  bad = ParseImageReference("app@sha256:1234");
  EXPECT_NE(bad.status().message().find("digest"), std::string::npos);
  bad = ParseImageReference("app:-x");
  EXPECT_NE(bad.status().message().find("tag"), std::string::npos);
  EXPECT_TRUE(ParseImageReference("reg.io/a__b/c-d--e.f_g:V1_x.y-z").ok());
  EXPECT_FALSE(ParseImageReference("reg.io/a___b").ok());
  EXPECT_FALSE(ParseImageReference("reg.io/a.-b").ok());
  EXPECT_FALSE(ParseImageReference("reg.io/a//b").ok());
  EXPECT_FALSE(ParseImageReference("reg.io/ab-").ok());
  EXPECT_TRUE(ParseImageReference("app:" + std::string(128, 't')).ok());
  EXPECT_FALSE(ParseImageReference("app:" + std::string(129, 't')).ok());
  EXPECT_FALSE(ParseImageReference("app@sha256:" + std::string(64, 'A')).ok());
  EXPECT_FALSE(IsSha256Digest("sha512:" + std::string(64, 'a')));
}

}  // namespace
}  // namespace gpupool
