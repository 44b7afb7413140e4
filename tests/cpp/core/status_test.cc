#include "stoker/status.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  STOKER_ASSIGN_OR_RETURN(int h, Half(x));
  STOKER_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, PropagatesTheFirstErrorWithContext) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().WithContext("shard.tar").message(), "shard.tar: 3 is odd");
  EXPECT_EQ(r.status().ToString(), "InvalidArgument: 3 is odd");
}

}  // namespace
}  // namespace stoker
