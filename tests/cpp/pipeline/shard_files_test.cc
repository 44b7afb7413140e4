// ShardFiles: the open-descriptor bound holds at any shard count, the least
// recently used shard is closed first, and a lease outlives its eviction.
#include "pipeline/shard_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace stoker {
namespace {

std::vector<std::string> MakeFiles(int n) {
  char tmpl[] = "/tmp/stoker-shard-files-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    paths.push_back(dir + "/f" + std::to_string(i));
    FILE* f = std::fopen(paths.back().c_str(), "wb");
    std::fputs(("shard " + std::to_string(i)).c_str(), f);
    std::fclose(f);
  }
  return paths;
}

std::string ReadAll(const RandomAccessReader& f) {
  std::vector<uint8_t> buf(16);
  Result<size_t> n = f.ReadAt(0, buf);
  return n.ok() ? std::string(buf.begin(), buf.begin() + static_cast<long>(*n)) : n.status().ToString();
}

TEST(ShardFilesTest, KeepsAtMostMaxOpenAndEvictsTheLeastRecentlyUsed) {
  std::vector<std::string> paths = MakeFiles(10);
  ShardFiles files(&paths, 3);
  for (uint32_t i = 0; i < 10; ++i) {
    auto f = files.Get(i);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(ReadAll(**f), "shard " + std::to_string(i));
    EXPECT_LE(files.open_count(), 3u);
  }
  EXPECT_EQ(files.opens(), 10u);
  // 7, 8, 9 are cached; touching 7 makes 8 the oldest.
  ASSERT_TRUE(files.Get(7).ok());
  ASSERT_TRUE(files.Get(0).ok());  // evicts 8
  EXPECT_EQ(files.opens(), 11u);
  ASSERT_TRUE(files.Get(7).ok());
  ASSERT_TRUE(files.Get(9).ok());
  EXPECT_EQ(files.opens(), 11u);
  ASSERT_TRUE(files.Get(8).ok());
  EXPECT_EQ(files.opens(), 12u);
}

TEST(ShardFilesTest, ALeaseStaysReadableAfterEviction) {
  std::vector<std::string> paths = MakeFiles(3);
  ShardFiles files(&paths, 1);
  auto lease = files.Get(0);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(files.Get(1).ok());  // evicts shard 0 from the cache
  ASSERT_TRUE(files.Get(2).ok());
  EXPECT_EQ(files.open_count(), 1u);
  EXPECT_EQ(ReadAll(**lease), "shard 0");  // the descriptor is still ours
}

TEST(ShardFilesTest, MapsLocalShardsOnlyWithinItsMapBound) {
  std::vector<std::string> paths = MakeFiles(6);  // "shard i": 7 bytes each
  {
    ShardFiles files(&paths, 4, 15);  // room for two mapped shards
    for (uint32_t i = 0; i < 6; ++i) {
      auto f = files.Get(i);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(ReadAll(**f), "shard " + std::to_string(i));  // the same bytes, mapped or not
      EXPECT_EQ(dynamic_cast<const MappedReader*>(f->get()) != nullptr, i != 2 && i != 3) << i;
      EXPECT_LE(files.mapped_bytes(), 15u);
    }
    // 2 and 3 found no room; 4 and 5 took the room of 0 and 1, evicted before them.
    EXPECT_EQ(files.mapped_bytes(), 14u);
  }
  ShardFiles none(&paths, 4, 0);
  auto f = none.Get(0);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(dynamic_cast<const MappedReader*>(f->get()), nullptr);
  EXPECT_EQ(none.mapped_bytes(), 0u);
}

TEST(ShardFilesTest, APreadOnlyShardIsNeverMapped) {
  // A mixture's local tar source ordered by single samples beside a source
  // read in blocks: its shards are read with pread, the others' mapped.
  std::vector<std::string> paths = MakeFiles(4);
  ShardFiles files(&paths, 4, ShardFiles::kMapUnbounded, DefaultIoOptions(), {true, false, true, false});
  for (uint32_t i = 0; i < 4; ++i) {
    auto f = files.Get(i);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(ReadAll(**f), "shard " + std::to_string(i));
    EXPECT_EQ(dynamic_cast<const MappedReader*>(f->get()) != nullptr, i % 2 == 1) << i;
  }
  EXPECT_EQ(files.mapped_bytes(), 14u);
}

TEST(ShardFilesTest, ConcurrentReadersNeverSeeAClosedDescriptor) {
  std::vector<std::string> paths = MakeFiles(16);
  ShardFiles files(&paths, 2);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const uint32_t s = static_cast<uint32_t>((i * 7 + t * 3) % 16);
        auto f = files.Get(s);
        if (!f.ok() || ReadAll(**f) != "shard " + std::to_string(s)) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(files.open_count(), 2u);
}

TEST(ShardFilesTest, DefaultBoundFollowsTheDescriptorLimit) {
  const size_t bound = ShardFiles::DefaultMaxOpenFiles();
  EXPECT_GE(bound, 4u);
  EXPECT_LE(bound, 1024u);
}

}  // namespace
}  // namespace stoker
