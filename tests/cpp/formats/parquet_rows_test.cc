// ParquetRows keeps at most its bound of decoded row groups, and the bound
// moves with the reads in flight (SetMaxGroups, called as the tuner changes
// io_depth): rows alternating between two groups are decoded again each time
// under a bound of one, and never again once the bound holds both. The file
// is written by Arrow's own Parquet writer; values read equal those written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#if __has_include(<parquet/arrow/writer.h>)
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>

#include "formats/parquet_file.h"

namespace stoker {
namespace {

// Rows 0..3 of one int64 column "x" = 10 * row, two rows per row group.
std::string WriteTwoGroups() {
  char tmpl[] = "/tmp/stoker-parquet-rows-XXXXXX";
  const std::string path = std::string(mkdtemp(tmpl)) + "/two.parquet";
  arrow::Int64Builder b;
  EXPECT_TRUE(b.AppendValues({0, 10, 20, 30}).ok());
  std::shared_ptr<arrow::Array> x = b.Finish().ValueOrDie();
  auto table = arrow::Table::Make(arrow::schema({arrow::field("x", arrow::int64())}), {x});
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  EXPECT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), out, /*chunk_size=*/2).ok());
  EXPECT_TRUE(out->Close().ok());
  return path;
}

// Row `row`'s value of "x", as the text a scalar field parses.
std::string ReadX(ParquetRows& rows, const ShardIndex& index, const RandomAccessReader& file, uint32_t row) {
  RowBytes bytes;
  SampleEntry entry;
  Status st = rows.Read(index, file, row, &bytes, &entry);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (entry.members.size() != 1) return "(" + std::to_string(entry.members.size()) + " members)";
  const MemberRef& m = entry.members[0];
  return std::string(reinterpret_cast<const char*>(bytes.data()) + m.offset, m.size);
}

TEST(ParquetRowsTest, TheBoundOnDecodedGroupsFollowsSetMaxGroups) {
  const std::string path = WriteTwoGroups();
  Result<ShardIndex> index = LoadParquetIndex(path);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  Result<std::unique_ptr<RandomAccessReader>> file = OpenReader(path, DefaultIoOptions());
  ASSERT_TRUE(file.ok());
  ParquetRows rows({"x"}, 1);
  for (int pass = 0; pass < 2; ++pass) {  // groups 0 and 1 in turn: one kept, so each read decodes
    EXPECT_EQ(ReadX(rows, *index, **file, 0), "0");
    EXPECT_EQ(ReadX(rows, *index, **file, 3), "30");
  }
  EXPECT_EQ(rows.decodes(), 4u);
  rows.SetMaxGroups(2);
  for (int pass = 0; pass < 3; ++pass) {  // group 0 once more, then both stay decoded
    EXPECT_EQ(ReadX(rows, *index, **file, 1), "10");
    EXPECT_EQ(ReadX(rows, *index, **file, 2), "20");
  }
  EXPECT_EQ(rows.decodes(), 5u);
  rows.SetMaxGroups(1);
  EXPECT_EQ(ReadX(rows, *index, **file, 0), "0");  // kept: no decode, no eviction
  EXPECT_EQ(rows.decodes(), 5u);
}

}  // namespace
}  // namespace stoker

#else
TEST(ParquetRowsTest, TheBoundOnDecodedGroupsFollowsSetMaxGroups) {
  GTEST_SKIP() << "built without pyarrow's Arrow C++ headers: Parquet sources are disabled";
}
#endif
