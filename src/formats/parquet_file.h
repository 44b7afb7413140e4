// formats/parquet_file.h — Parquet files as shards: each row is a sample,
// each column a field, read through Apache Arrow's C++ Parquet reader (the
// libraries of the user's pyarrow, through a plugin loaded on first use; see
// formats/parquet/engine.h for why). Arrow's types stay behind this header.
//
// Index: one SampleEntry per row, key = the row number. A row's bytes are
// known only once its column chunk is decoded, so begin/end are the row's
// share of its row group's stored bytes (rows of one row group are
// consecutive): what memory and read-ahead estimates need, never a file
// offset. The row group layout and the footer (parsed once) ride along in
// ShardIndex::parquet.
//
// Reads: ParquetRows decodes a row group's wanted columns at once
// (parquet::arrow::FileReader::ReadRowGroup; a row cannot be decoded alone,
// its page may hold many rows and be compressed) and keeps the last few
// decoded row groups, so consecutive rows of a group cost one decode. A
// row's field values are then laid out as members that the tar decoders
// read unchanged:
//   binary / string / large_* / *_view / fixed_size_binary  -> the bytes
//   struct {bytes, path} (the Hugging Face Hub's Image())  -> its bytes; null bytes (a
//       `datasets` Image() built from file paths): the file at `path`, a relative
//       one from the Parquet file's directory or URL
//   integers, floats, bool                                   -> decimal text (stoker.scalar())
//   list / fixed_size_list of numbers                        -> a 1-D .npy (stoker.npy())
// A null value, a missing column or another type is an error naming the
// file, row, row group and column.
// The file is read through stoker's own RandomAccessReader (io/reader.h),
// so local files, HTTP and S3 get stoker's ranged reads, retries and
// credentials.
//
// Arrow is not linked here: the first Parquet call loads the plugin built
// for the user's pyarrow major (formats/parquet/plugin_loader.h). No plugin
// for it, or no pyarrow: FailedPrecondition naming the pyarrow versions that
// work. ParquetSupported(): whether this build has any plugin.
// Thread-safety: ParquetRows::Read from many threads at once (one mutex
// over its cache; decodes run outside it); the rest are values and free
// functions.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/page_allocator.h"
#include "formats/sample_index.h"
#include "io/reader.h"

namespace stoker {

// A path or URL whose name ends in ".parquet" (any case).
bool IsParquetPath(std::string_view path);
// Whether this build can read Parquet.
bool ParquetSupported();

// The parsed footer and row group layout of one file, and one decoded row
// group (formats/parquet/engine.h: the plugin's, Arrow inside).
class ParquetFooter;
class ParquetGroup;

// The index of one Parquet file (see above); index.parquet is set.
Result<ShardIndex> LoadParquetIndex(const std::string& path, const IoOptions& io = DefaultIoOptions());

// The shuffle block (pipeline/planner.h) that moves rows a row group at a
// time: the files' row group size, i.e. the most common row count of a row
// group that is not its file's last (a writer's row_group_size; the last
// group holds the rest), or of a file's only group; ties go to the larger;
// at least 2. Blocks cut at its multiples then fall on row group edges, so
// the mix (planner.h) holds a run of M blocks as about M decoded row groups.
// Not the mean: groups of 100, 100, 100 and 37 rows have a mean of 84, and
// blocks of 84 would straddle two row groups each.
int ParquetShuffleBlock(const std::vector<ShardIndex>& indexes);

// The largest row group's uncompressed bytes (all columns: a bound on what
// decoding its wanted columns holds); 0 for a file that is not Parquet.
uint64_t ParquetMaxRowGroupBytes(const ShardIndex& index);

// What `stoker inspect` prints: one line per column of the Arrow schema.
struct ParquetColumnInfo {
  std::string name;
  std::string arrow_type;   // Arrow's ToString(): "binary", "struct<bytes: binary, path: string>"
  std::string suggested;    // the stoker field that reads it: "image", "scalar", "text", "npy", "raw", "" (none)
};
struct ParquetSummary {
  int64_t rows = 0;
  int row_groups = 0;
  std::string created_by;
  std::vector<ParquetColumnInfo> columns;
};
Result<ParquetSummary> DescribeParquet(const ShardIndex& index);

using RowBytes = std::vector<uint8_t, PageAllocator<uint8_t>>;

class ParquetRows {
 public:
  // `columns`: the fields' names, each a top-level column. max_groups: decoded
  // row groups kept (at least 1); readers in flight may hold one more each.
  // `io`: how files named inside rows (an image struct's path) are read —
  // the loader's own storage settings, as its shards are.
  ParquetRows(std::vector<std::string> columns, size_t max_groups, IoOptions io = DefaultIoOptions());
  ~ParquetRows();

  // Row `row` of `shard` (read with `file`): its fields' values are
  // appended to *bytes one after another (a run's rows share one buffer),
  // and *entry gets its members (offsets into *bytes; begin and end bound
  // the row's part).
  Status Read(const ShardIndex& shard, const RandomAccessReader& file, uint32_t row, RowBytes* bytes,
              SampleEntry* entry);

  uint64_t decodes() const;  // row groups decoded so far

  // A new bound on decoded row groups kept (at least 1), as the reads in
  // flight change (pipeline/autotune.h); a lower one evicts at the next load.
  void SetMaxGroups(size_t max_groups);

 private:
  struct Slot {
    const ParquetFooter* file = nullptr;
    int group = -1;
    std::shared_ptr<const ParquetGroup> data;  // null while `loading`
    bool loading = false;
  };
  Result<std::shared_ptr<const ParquetGroup>> GetGroup(const ShardIndex& shard, const RandomAccessReader& file,
                                                int group);

  const std::vector<std::string> columns_;
  const IoOptions io_;
  mutable std::mutex mu_;
  size_t max_groups_;               // guarded by mu_
  std::condition_variable loaded_;  // a load finished (with mu_)
  std::list<Slot> slots_;           // guarded by mu_; front = most recently used
  uint64_t decodes_ = 0;            // guarded by mu_
};

}  // namespace stoker
