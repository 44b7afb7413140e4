// formats/sample_index.h — a shard's samples: members grouped by key, and the
// sidecar index file (`<shard>.idx`, JSON) that gives random access to each
// sample by one pread of [begin, end).
//
// Key rules:
//  * kWebDataset: the key is the member path up to the first dot of its
//    basename; the field is the rest ("a/b/x.seg.png" -> key "a/b/x", field
//    "seg.png"). Members of one sample are adjacent, in any order among
//    themselves.
//  * kUnderscoreSuffix: as kWebDataset, and a member whose key is another's key
//    plus "_<suffix>" joins it with field "<suffix>.<ext>": the SA-1B layout
//    "sa_1.jpg" + "sa_1_features.npz" is one sample {jpg, features.npz}.
// A key seen again after other keys, or a field twice in one sample, is
// DataLoss naming the member and offset; under kUnderscoreSuffix that includes
// "sa_1_features.npz" arriving after sample "sa_1" was closed. Members whose
// basename has no dot or starts with one (README, .DS_Store) are in no sample,
// as in webdataset.
// Thread-safety: values and free functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tar.h"
#include "stoker/key_rule.h"
#include "stoker/status.h"

namespace stoker {

class ParquetFooter;  // formats/parquet_file.h

// Bytes a member carries itself rather than the shard (an image folder's
// label). Almost no member has any, so it is one pointer, null when empty,
// not a std::string's 32 bytes: an index holds a member record per member of
// the dataset, and every byte of it is paid per sample in every rank.
class InlineBytes {
 public:
  InlineBytes() = default;
  explicit InlineBytes(std::string_view s) { Assign(s); }
  InlineBytes(const InlineBytes& o) { Assign(o.view()); }
  InlineBytes(InlineBytes&&) noexcept = default;
  InlineBytes& operator=(const InlineBytes& o) {
    Assign(o.view());
    return *this;
  }
  InlineBytes& operator=(InlineBytes&&) noexcept = default;
  InlineBytes& operator=(std::string_view s) {
    Assign(s);
    return *this;
  }

  bool empty() const { return !bytes_; }
  const char* data() const { return bytes_ ? bytes_->data() : ""; }
  size_t size() const { return bytes_ ? bytes_->size() : 0; }
  std::string_view view() const { return {data(), size()}; }

 private:
  void Assign(std::string_view s) { bytes_ = s.empty() ? nullptr : std::make_unique<const std::string>(s); }
  std::unique_ptr<const std::string> bytes_;
};

struct MemberRef {
  std::string field;     // "jpg", "features.npz", "cls"
  std::string name;      // full member name, for messages
  uint64_t offset;       // data offset in the shard
  uint64_t size;
  // Not empty: the member's bytes, held here rather than in the shard (an
  // image folder's "cls" label); offset/size then mean nothing.
  InlineBytes inline_data = {};
  // A Parquet row's value (formats/parquet_file.h): offset is within the
  // row's read buffer, not the file; `name` says where it is ("row 7 (row group 0) column 'label'").
  bool row_value = false;
};

struct SampleEntry {
  std::string key;
  std::vector<MemberRef> members;
  uint64_t begin;  // first header byte of the sample's first member
  uint64_t end;    // one past its last data byte
  // The member a field name asks for, by WebDataset's rule: the member whose
  // field is `field` exactly; else, as webdataset lowercases suffixes and
  // decodes "jpg" and "jpeg" alike, the first whose field equals it ignoring
  // ASCII case with a final "jpeg" read as "jpg" (field "jpg" reads member
  // "JPEG", "png" reads "PNG"). nullptr if none.
  const MemberRef* Find(std::string_view field) const;
  // The member whose field is exactly `field` (a sample's duplicate check).
  const MemberRef* FindExact(std::string_view field) const;
};

struct ShardIndex {
  std::string shard_path;
  uint64_t shard_size = 0;
  KeyRule key_rule = KeyRule::kWebDataset;
  std::vector<SampleEntry> samples;
  // Set for a Parquet file (formats/parquet_file.h): its samples are rows,
  // whose bytes come from decoded column chunks, not from [begin, end).
  std::shared_ptr<const ParquetFooter> parquet;
};

Result<std::vector<SampleEntry>> GroupSamples(const std::vector<TarMember>& members, KeyRule rule,
                                              const std::string& shard_path);

// The sidecar path for a shard: "<shard>.idx"; a URL's query is kept after it
// ("a.tar?token=t" -> "a.tar.idx?token=t", io/url.h).
std::string IndexPathFor(const std::string& shard_path);

Status WriteShardIndex(const ShardIndex& index, const std::string& index_path);
Result<ShardIndex> ReadShardIndex(const std::string& index_path, const IoOptions& io = DefaultIoOptions());

// Reads the sidecar when it exists and matches the shard (same size, same key
// rule); otherwise scans the tar headers. Never writes. For a remote shard
// (io/reader.h) the "<url>.idx" sidecar is fetched when present, else the shard
// is streamed once in large sequential reads to build the index.
Result<ShardIndex> LoadOrBuildShardIndex(const std::string& shard_path, KeyRule rule,
                                         const IoOptions& io = DefaultIoOptions());

}  // namespace stoker
