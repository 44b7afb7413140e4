// pipeline/shard_stream.h — one tar shard's samples, read front to back once
// (the stream mode's reader; webdataset's tarfile_samples): members come in
// archive order through formats/tar.h's TarStream, and consecutive members
// sharing a key (formats/sample_index.h's SplitKey, webdataset's rule) are one
// sample. Each sample owns its members' data, packed end to end (SampleEntry::
// packed: a tiny sample's tar headers and padding would be most of what the
// shuffle buffer holds), so it can wait in a shuffle buffer after the shard is
// closed; its SampleEntry's offsets are the shard's, so the decoders and their
// messages (shard, member, offset) are the indexed mode's.
// A field twice in one sample is DataLoss naming the shard, member and offset.
// A key that comes back after other keys starts a new sample, as in
// webdataset (the indexed mode refuses it; a stream keeps no list of keys).
// Thread-safety: single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "formats/sample_index.h"
#include "formats/tar.h"
#include "io/reader.h"
#include "stoker/status.h"

namespace stoker {

// One sample of a stream, compact: thousands wait in a shuffle buffer, so it
// is one vector, its members' data packed end to end (SampleEntry::packed)
// and then its SampleEntry encoded (key, begin, end, each member's field,
// name unless it is key.field, offset and size), which Entry() decodes where
// the sample is used. A 2-member sample with an 11-byte key and 3-letter
// fields takes about 150 bytes besides its data (90 of them the entry), in the
// buffer and its vector; a SampleEntry with its vector of members took about
// 380.
class StreamSample {
 public:
  StreamSample() = default;
  // `data`: the members' data, packed, as `entry` (packed) places them.
  StreamSample(uint32_t shard, const SampleEntry& entry, std::vector<uint8_t> data);
  // Moved from, a sample is empty (no data), not a size over no bytes.
  StreamSample(StreamSample&& o) noexcept
      : bytes_(std::move(o.bytes_)), data_size_(std::exchange(o.data_size_, 0)), shard_(o.shard_) {}
  StreamSample& operator=(StreamSample&& o) noexcept {
    bytes_ = std::move(o.bytes_);
    data_size_ = std::exchange(o.data_size_, 0);
    shard_ = o.shard_;
    return *this;
  }

  uint32_t shard() const { return shard_; }  // in the loader's shard list
  std::span<uint8_t> data() { return {bytes_.data(), data_size_}; }
  std::span<const uint8_t> data() const { return {bytes_.data(), data_size_}; }
  SampleEntry Entry() const;  // offsets in the shard
  size_t HeldBytes() const { return bytes_.capacity(); }  // data and entry, as allocated

 private:
  std::vector<uint8_t> bytes_;  // data, then the entry encoded
  size_t data_size_ = 0;
  uint32_t shard_ = 0;
};

class ShardStream {
 public:
  // Opens `path` (a local path or URL; io/reader.h): one HEAD when remote,
  // no body read until the first Next. `first` (the stream's first shard):
  // its reads start small (formats/tar.h), for the first batch's sake.
  static Result<std::unique_ptr<ShardStream>> Open(const std::string& path, uint32_t shard, const IoOptions& io,
                                                   bool first = false);

  // The next sample; nullopt once the shard is done.
  Result<std::optional<StreamSample>> Next();
  // The read window this shard's stream grows to.
  size_t window_bytes() const { return TarStream::WindowBytes(*reader_); }

 private:
  ShardStream(std::unique_ptr<RandomAccessReader> reader, uint32_t shard, bool first);
  // The sample being read (held): its entry and data so far. Kept from one
  // sample to the next, so its key and its member list's array reuse their
  // memory (the data moves into the sample made of it).
  struct Building {
    bool held = false;
    SampleEntry entry;
    std::vector<uint8_t> data;
  };
  // Adds member m to the open sample (its bytes from the sample's end so far).
  Status Add(const TarMember& m, std::string_view field);
  // The open sample, done and made compact (nullopt if none).
  std::optional<StreamSample> Complete();

  std::unique_ptr<RandomAccessReader> reader_;
  TarStream tar_;
  uint32_t shard_;
  Building open_;
  // The member after the open sample's last: it begins the next sample.
  std::optional<TarMember> ahead_;
  bool done_ = false;
};

}  // namespace stoker
