// pipeline/sources.cc: what a user writes becomes shard paths. A URL's query
// is taken literally (braces apply to the path, every shard keeps the query),
// and a scheme stoker does not read is an error naming those it does.
// (Remote existence, listings and globs run against servers in
// tests/python/test_urls.py and test_remote.py.)
#include <gtest/gtest.h>

#include "stoker/loader.h"

namespace stoker {
namespace {

TEST(SourcesTest, BracesExpandTheUrlPathAndEveryShardKeepsTheQuery) {
  auto r = ExpandSources({"https://cdn/d/shard-{08..10}.tar?token=a{b}c&x=1"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<std::string>{"https://cdn/d/shard-08.tar?token=a{b}c&x=1",
                                          "https://cdn/d/shard-09.tar?token=a{b}c&x=1",
                                          "https://cdn/d/shard-10.tar?token=a{b}c&x=1"}));
}

TEST(SourcesTest, AQueryIsNoWildcardButAnHttpGlobStillNeedsAListing) {
  auto r = ExpandSources({"http://h/a.tar?sig=x*y"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, (std::vector<std::string>{"http://h/a.tar?sig=x*y"}));
  r = ExpandSources({"http://h/a-*.tar?token=s3cr3t"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("HTTP has no listing"), std::string::npos);
  EXPECT_EQ(r.status().message().find("s3cr3t"), std::string::npos) << r.status().message();
}

TEST(SourcesTest, UnreadSchemesAreNamedNotTakenForLocalPaths) {
  auto r = ExpandSources({"gs://bucket/shard-{0..1}.tar"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("storage.googleapis.com"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace stoker
