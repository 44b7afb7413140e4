// tests/cpp/formats/parquet_block_test.cc — ParquetShuffleBlock: the files'
// row group size (what a writer's row_group_size gave), so blocks cut at its
// multiples fall on row group edges (pipeline/planner.h's mix), not the mean.
#include <gtest/gtest.h>

#include "formats/parquet/engine.h"
#include "formats/parquet_file.h"

namespace stoker {
namespace {

// A file's index with row groups of these row counts (no Arrow: only the layout).
ShardIndex File(const std::vector<int64_t>& groups) {
  auto footer = std::make_shared<ParquetFooter>();
  footer->group_first_row.push_back(0);
  for (int64_t rows : groups) {
    footer->group_first_row.push_back(footer->group_first_row.back() + rows);
    footer->group_bytes.push_back(static_cast<uint64_t>(rows) * 10);
  }
  ShardIndex index;
  index.parquet = std::move(footer);
  return index;
}

TEST(ParquetBlockTest, TheWritersRowGroupSizeNotTheMean) {
  std::vector<ShardIndex> files;
  files.push_back(File({100, 100, 100, 37}));  // mean 84
  files.push_back(File({100, 100, 12}));
  EXPECT_EQ(ParquetShuffleBlock(files), 100);
}

TEST(ParquetBlockTest, FilesOfOneRowGroupGiveTheLargestTiesToTheLarger) {
  std::vector<ShardIndex> files;
  files.push_back(File({300}));
  files.push_back(File({250}));
  EXPECT_EQ(ParquetShuffleBlock(files), 300) << "every file one block";
  std::vector<ShardIndex> one;
  one.push_back(File({100000}));
  EXPECT_EQ(ParquetShuffleBlock(one), 100000) << "no cap: a big row group is one block, mixed whole";
}

TEST(ParquetBlockTest, AtLeastTwo) {
  std::vector<ShardIndex> files;
  files.push_back(File({1, 1, 1}));
  EXPECT_EQ(ParquetShuffleBlock(files), 2);
  EXPECT_EQ(ParquetShuffleBlock({}), 2);
}

}  // namespace
}  // namespace stoker
