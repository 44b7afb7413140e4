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
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/tar.h"
#include "stoker/key_rule.h"
#include "stoker/status.h"

namespace stoker {

class ParquetFooter;  // formats/parquet_file.h

// Bytes a member carries itself rather than the shard (an image folder's
// label). Almost no member has any, so it is one pointer, null when empty,
// not a std::string's 32 bytes.
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

// A member with its own strings, as a SampleEntry holds it.
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

// One member as the readers of an index see it: a view into a SampleTable or
// a SampleEntry, valid while that lives. Cheap to make and copy.
struct MemberView {
  std::string_view field;
  uint64_t offset = 0;           // its data's offset in the shard
  uint64_t size = 0;
  uint64_t at = 0;               // where its data begins in the sample's bytes (SampleEntry::packed)
  std::string_view inline_data;  // as MemberRef's
  bool row_value = false;        // as MemberRef's
  // The full member name, for messages. A tar member's name is its sample's
  // key, a '.' (or '_' for an underscore-rule suffix) and its field: the table
  // keeps only the rule, so the name is made when asked for.
  std::string name() const;
  // Its data: the inline bytes, else `at` in the sample's bytes.
  std::span<const uint8_t> data(std::span<const uint8_t> sample_bytes) const;

  std::string_view name_base;  // the whole name, or the key when name_join is set
  char name_join = 0;          // 0, '.' or '_'
};

class SampleTable;
struct SampleEntry;

// Fields read from members of other names: (field asked for, the member
// field that holds it), one source's of a mixture (MixOptions::members), so
// sources that name a member differently fill one output schema.
using FieldAliases = std::vector<std::pair<std::string, std::string>>;

// The member field that holds `field` under `aliases` (null: none): `field` where none renames it.
std::string_view AliasedField(const FieldAliases* aliases, std::string_view field);

// A sample's members, by position; yields MemberView values.
class MemberList {
 public:
  MemberList() = default;
  MemberList(const SampleEntry* entry) : entry_(entry) {}
  MemberList(const SampleTable* table, std::string_view key, uint64_t begin, uint32_t first, uint32_t count)
      : table_(table), key_(key), begin_(begin), first_(first), count_(count) {}
  size_t size() const;
  bool empty() const { return size() == 0; }
  MemberView operator[](size_t i) const;
  // The member field that holds `field` in this sample's source (FieldAliases).
  std::string_view MemberFieldFor(std::string_view field) const;
  // Its source's aliases (null: none); shared, for an owning copy.
  std::shared_ptr<const FieldAliases> shared_aliases() const;

  class iterator {
   public:
    using value_type = MemberView;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const MemberList* list, size_t i) : list_(list), i_(i) {}
    MemberView operator*() const { return (*list_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const MemberList* list_ = nullptr;
    size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  const SampleEntry* entry_ = nullptr;
  const SampleTable* table_ = nullptr;
  std::string_view key_;
  uint64_t begin_ = 0;
  uint32_t first_ = 0;
  uint32_t count_ = 0;
};

// One sample as the readers of an index see it (see MemberView).
struct SampleView {
  std::string_view key;
  uint64_t begin = 0;  // first header byte of the sample's first member
  uint64_t end = 0;    // one past its last data byte
  MemberList members;
  bool packed = false;  // as SampleEntry's
  // The member a field name asks for, by WebDataset's rule: the member whose
  // field is `field` exactly; else, as webdataset lowercases suffixes and
  // decodes "jpg" and "jpeg" alike, the first whose field equals it ignoring
  // ASCII case with a final "jpeg" read as "jpg" (field "jpg" reads member
  // "JPEG", "png" reads "PNG"). Empty if none. A field its source reads from
  // a member of another name (FieldAliases) looks for that name.
  std::optional<MemberView> Find(std::string_view field) const;
  // The member whose field is exactly `field`.
  std::optional<MemberView> FindExact(std::string_view field) const;
  // An owning copy.
  SampleEntry ToEntry() const;
};

// A sample with its own strings: what GroupSamples and a Parquet row read
// build, and what a SampleTable is filled from.
struct SampleEntry {
  std::string key;
  std::vector<MemberRef> members;
  uint64_t begin;  // first header byte of the sample's first member
  uint64_t end;    // one past its last data byte
  // The sample's bytes hold its members' data only, end to end in member
  // order (a stream's sample, which waits in a shuffle buffer: the tar
  // headers and padding between its members would be most of a small
  // sample's bytes); else they are the shard's [begin, end).
  bool packed = false;
  // Its source's (FieldAliases; null: none), kept by SampleView::ToEntry.
  std::shared_ptr<const FieldAliases> aliases;
  // As SampleView's.
  const MemberRef* Find(std::string_view field) const;
  const MemberRef* FindExact(std::string_view field) const;
  SampleView view() const { return {key, begin, end, MemberList(this), packed}; }
  operator SampleView() const { return view(); }
};

// A shard's samples, stored compactly: every rank holds the index of every
// shard, so its bytes per sample bound how large a dataset a node can load
// (issue 31). A sample is {begin, end}: 16 bytes. Keys lie end to end in one
// string; where each starts is computed while all keys of the shard have one
// length (zero-padded numbers, hashes), else kept, 4 bytes a sample; the same
// for where a sample's members start, while every sample has as many. A
// member is 12 bytes: its offset from the sample's begin and its size in 32
// bits each, its field as an id into the shard's few interned field names,
// and how its name follows from key and field. A 2-member sample with an
// 11-byte key takes 51 bytes, where a vector of SampleEntry took ~280. A
// member that does not fit that form (a name not made of key and field,
// inline bytes, a sample or member of 4 GiB or more, a shard with more than
// kInternedFields fields) keeps its whole record on the side. A shard's keys
// and strings are under 4 GiB.
// Read-only once built: concurrent readers are safe.
class SampleTable {
 public:
  static constexpr size_t kInternedFields = 255;

  SampleTable() = default;
  explicit SampleTable(const std::vector<SampleEntry>& samples);

  size_t size() const { return samples_.size(); }
  bool empty() const { return samples_.empty(); }
  SampleView operator[](size_t i) const;
  SampleView front() const { return (*this)[0]; }

  void reserve(size_t samples, size_t members = 0);
  void push_back(const SampleEntry& sample);
  // Gives back what growth left spare; call once the table is filled.
  void shrink_to_fit();
  // Heap bytes held (the compactness test, bench notes).
  size_t MemoryBytes() const;
  // Its source's field aliases (a mixture's; null: none).
  void SetAliases(std::shared_ptr<const FieldAliases> aliases) { aliases_ = std::move(aliases); }
  const std::shared_ptr<const FieldAliases>& aliases() const { return aliases_; }

  class iterator {
   public:
    using value_type = SampleView;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const SampleTable* t, size_t i) : t_(t), i_(i) {}
    SampleView operator*() const { return (*t_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const SampleTable* t_ = nullptr;
    size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

 private:
  friend class MemberList;
  struct Sample {
    uint64_t begin;
    uint64_t end;
  };
  struct Member {
    uint32_t offset;  // from the sample's begin
    uint32_t size;
    uint16_t field;   // in fields_
    uint16_t flags;
  };
  // A member kept whole (see the class comment).
  struct Irregular {
    uint32_t member;
    uint32_t field_at, field_len;
    uint32_t name_at, name_len;
    uint32_t inline_at, inline_len;
    bool row_value;
    uint64_t offset, size;
  };
  struct Span {
    uint32_t at, len;
  };
  MemberView MemberAt(uint32_t i, std::string_view key, uint64_t begin) const;
  uint32_t KeyAt(size_t i) const { return key_at_.empty() ? static_cast<uint32_t>(i * key_len_) : key_at_[i]; }
  uint32_t FirstMember(size_t i) const {
    return first_member_.empty() ? static_cast<uint32_t>(i * members_per_) : first_member_[i];
  }
  Span Text(std::string_view s);
  std::string_view TextAt(uint32_t at, uint32_t len) const { return std::string_view(text_).substr(at, len); }

  std::string keys_;
  std::string text_;  // interned fields, and the irregular members' strings
  std::vector<Sample> samples_;
  std::vector<Member> members_;
  // Empty while every key has key_len_ bytes; else where each starts in keys_.
  std::vector<uint32_t> key_at_;
  size_t key_len_ = 0;
  // Empty while every sample has members_per_ members; else each one's first.
  std::vector<uint32_t> first_member_;
  size_t members_per_ = 0;
  std::vector<Span> fields_;           // interned field names, in text_
  std::vector<Irregular> irregular_;  // in member order
  std::shared_ptr<const FieldAliases> aliases_;
};

struct ShardIndex {
  std::string shard_path;
  uint64_t shard_size = 0;
  KeyRule key_rule = KeyRule::kWebDataset;
  SampleTable samples;
  // Set for a Parquet file (formats/parquet_file.h): its samples are rows,
  // whose bytes come from decoded column chunks, not from [begin, end).
  std::shared_ptr<const ParquetFooter> parquet;
  // Built by reading the shard's tar headers (no sidecar): for a remote
  // shard, the whole shard was read.
  bool scanned = false;
};

// Splits "a/b/x.seg.png" into key "a/b/x" and field "seg.png" (webdataset's
// rule). A basename with no dot, or starting with one, belongs to no sample
// (webdataset skips them too: READMEs, ".DS_Store"): false.
bool SplitKey(std::string_view name, std::string_view* key, std::string_view* field);

Result<std::vector<SampleEntry>> GroupSamples(const std::vector<TarMember>& members, KeyRule rule,
                                              const std::string& shard_path);

// The sidecar path for a shard: "<shard>.idx"; a URL's query is kept after it
// ("a.tar?token=t" -> "a.tar.idx?token=t", io/url.h).
std::string IndexPathFor(const std::string& shard_path);

Status WriteShardIndex(const ShardIndex& index, const std::string& index_path);
Result<ShardIndex> ReadShardIndex(const std::string& index_path, const IoOptions& io = DefaultIoOptions());

// A sidecar exactly as WriteShardIndex writes it (nlohmann's dump: no spaces,
// keys in alphabetical order, unsigned numbers) whose strings are plain
// ASCII, read by hand into `index`: several times the speed of a JSON parser,
// which was most of a loader's start over sidecars (a 10,000-sample sidecar
// in about 12 ms). Anything else (another writer's spacing or key order, an
// escape, a non-ASCII name, another version, a value out of place or out of
// the shard) is false, `index` partly filled: ReadShardIndex then reads the
// document with nlohmann's parser, and its errors are that parser's.
bool ParseWrittenShardIndex(std::string_view text, ShardIndex* index);

// Reads the sidecar when it exists and matches the shard (same size, same key
// rule); otherwise scans the tar headers. Never writes. For a remote shard
// (io/reader.h) the "<url>.idx" sidecar is fetched when present, else the shard
// is streamed once in large sequential reads to build the index.
// `known_size` > 0 (a manifest's): a remote shard's sidecar for a shard of
// that size is taken without asking the shard (no HEAD: one round trip, not
// two); otherwise, as above.
Result<ShardIndex> LoadOrBuildShardIndex(const std::string& shard_path, KeyRule rule,
                                         const IoOptions& io = DefaultIoOptions(), uint64_t known_size = 0);

}  // namespace stoker
