// formats/parquet/engine.h — what the Arrow plugin (formats/parquet/arrow_engine.cc,
// built once per pyarrow major as libstoker_parquet_arrow<major>.so) gives the
// engine, and all the engine knows of it: stoker's own types, no Arrow.
//
// Why a plugin: pyarrow's libarrow/libparquet change SONAME with each major
// (libarrow.so.2600), so code linked to them loads beside that major only.
// Kept out of the extension and the CLI, they load without pyarrow, and Parquet
// works with whichever supported pyarrow the user has (parquet/plugin_loader.h
// finds and loads the plugin on first use).
//
// Both sides are built by the same compiler from the same tree (one wheel),
// so C++ types cross the boundary; kParquetEngineAbi guards a stale plugin.
// The plugin never allocates what the engine frees with another allocator
// (values come back as views; the engine copies them into its buffers), and
// no exception crosses it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "formats/parquet_file.h"
#include "io/reader.h"
#include "stoker/dtype.h"
#include "stoker/status.h"

namespace stoker {

// Bumped whenever a type below changes.
inline constexpr int kParquetEngineAbi = 1;

// One file's parsed footer: what the engine reads of it, filled by the
// plugin, whose subclass keeps Arrow's metadata and schema.
class ParquetFooter {
 public:
  virtual ~ParquetFooter() = default;

  std::string path;
  std::vector<int64_t> group_first_row;    // per row group, and the total rows last
  std::vector<uint64_t> group_bytes;       // per row group: stored bytes (at least its rows)
  uint64_t max_group_uncompressed = 0;     // the largest row group's uncompressed bytes
  ParquetSummary summary;                  // schema and counts (DescribeParquet)

  int64_t rows() const { return group_first_row.empty() ? 0 : group_first_row.back(); }
  int groups() const { return static_cast<int>(group_bytes.size()); }
  // The row group holding `row`.
  int GroupOf(int64_t row) const {
    auto it = std::upper_bound(group_first_row.begin(), group_first_row.end(), row);
    return static_cast<int>(it - group_first_row.begin()) - 1;
  }
};

// One value of a decoded row group, as a row's member holds it.
struct ParquetValue {
  enum class Kind {
    kBytes,      // `bytes` is the member's bytes
    kImagePath,  // an image struct with null bytes: `bytes` is its path (read by the engine)
    kNumbers,    // a list of numbers: `bytes` holds `count` elements of `dtype` (a 1-D .npy)
  };
  Kind kind = Kind::kBytes;
  std::string_view bytes;  // into the group's data or the caller's scratch; valid while both live
  DType dtype = DType::kU8;
  int64_t count = 0;
};

// The wanted columns of one decoded row group.
class ParquetGroup {
 public:
  virtual ~ParquetGroup() = default;
  // Row `row` (within the group) of column `column` (an index into the
  // columns asked for). Errors say what is wrong with the value; the engine
  // adds file, row and column. Thread-safe (const reads of decoded data).
  virtual Status Value(size_t column, int64_t row, std::string* scratch, ParquetValue* out) const = 0;
};

// The plugin's entry points; one instance, alive for the process.
class ParquetEngine {
 public:
  // `file` is `path` opened by the engine (stoker's readers: local, HTTP, S3).
  virtual Result<std::shared_ptr<const ParquetFooter>> ReadFooter(const std::string& path,
                                                                   const RandomAccessReader& file) const = 0;
  // Decodes `columns` (top-level names) of row group `group`; an unknown
  // column is NotFound naming the file's columns.
  virtual Result<std::shared_ptr<const ParquetGroup>> DecodeGroup(const ParquetFooter& footer,
                                                                  const RandomAccessReader& file, int group,
                                                                  const std::vector<std::string>& columns) const = 0;
  // The Arrow C++ version the plugin runs with ("26.0.1").
  virtual std::string ArrowVersion() const = 0;

 protected:
  ~ParquetEngine() = default;
};

}  // namespace stoker

// The plugin's one exported symbol: its engine, or null when `abi` is not
// the plugin's kParquetEngineAbi.
extern "C" const stoker::ParquetEngine* stoker_parquet_engine(int abi);
