#include "base/status.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("x: " + std::to_string(x) + " is odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  GPUPOOL_ASSIGN_OR_RETURN(int h, Half(x));
  GPUPOOL_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  Status s = Status::NotFound("pool 'a' not found");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: pool 'a' not found");
  EXPECT_EQ(s.WithContext("get pool").message(), "get pool: pool 'a' not found");
}

TEST(StatusTest, ResultPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);  // 6/2 = 3, then 3 is odd.
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: 3 is odd");
}

}  // namespace
}  // namespace gpupool
