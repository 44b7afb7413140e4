// io/restart_reader.h — what the decompressing readers share
// (io/gzip_reader.h, io/zstd_reader.h): a stream that decodes only forward,
// read at uncompressed offsets.
//
// One pass over the object builds a table of restart points (gzip: access
// points with their window; zstd: frame starts). A read takes an idle
// decoder ("cursor") that an earlier read left between the last point at or
// before its offset and the offset, else starts one at that point; decodes
// forward, discarding, up to the offset; then decodes into the caller's
// buffer and parks the cursor where it stopped. Reading a shard in order
// therefore decodes it once; a random read costs at most one span.
// Tables are kept process-wide (RestartTableCache, keyed by name, size and
// mtime, LRU-bounded by bytes): the index scan, the loader's probe and the
// reader threads open the same shard and pay for the table pass once.
//
// A Codec provides:
//   static constexpr const char* kName;   "gzip", for messages
//   struct Point { uint64_t out; ... };   a restart point, by increasing out
//   struct Cursor : RestartCursor { ... }; a decoder positioned at `out`
//   static Result<std::unique_ptr<Cursor>> Start(const RandomAccessReader& raw, const Point& p);
//   static Status Decode(const RandomAccessReader& raw, Cursor& c, uint8_t* dst, size_t n);
//     exactly n bytes of output (the caller stays below the table's size);
//     sets c.broken when it met the stream's fault.
// Thread-safety: as every RandomAccessReader, ReadAt from many threads; the
// cursor pool and the table cache lock their own state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/reader.h"

namespace stoker {

template <class Point>
struct RestartTable {
  std::vector<Point> points;  // by increasing out; points[0].out == 0
  uint64_t size = 0;          // uncompressed bytes decoded before any fault
  Status damage;              // what broke the stream, if anything (see Damage())
  uint64_t bytes = 0;         // memory held, for the cache's budget
};

// What every cursor holds besides its decoder: the compressed input it reads
// through and where it stands in both streams.
struct RestartCursor {
  std::vector<uint8_t> in;
  uint64_t read_off = 0;  // next compressed byte to read into `in`
  uint64_t out = 0;       // uncompressed offset of the next output byte
  bool broken = false;    // met the stream's fault: not reusable

  // The next compressed bytes into `in`: their count, or DataLoss (naming the
  // offsets) when the object has no more, which a built table rules out
  // unless the file changed since it was opened.
  Result<size_t> Refill(const RandomAccessReader& raw, const char* codec);
};

// "name\nsize\nvariant[\nmtime]": a local file rewritten in place gets a new key.
std::string RestartTableKey(const RandomAccessReader& raw, const std::string& variant);

template <class Table>
class RestartTableCache {
 public:
  struct Stats {
    size_t tables = 0;
    uint64_t bytes = 0;
    uint64_t builds = 0;  // tables built (one decoding pass each) since start
  };

  explicit RestartTableCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // The table for raw (with `variant`, e.g. the access-point span), built by
  // build() on a miss. Built outside the lock: a pass over a large shard must
  // not stall other opens; two built at once keep the first.
  template <class Build>
  Result<std::shared_ptr<const Table>> Get(const RandomAccessReader& raw, const std::string& variant, Build build) {
    const std::string key = RestartTableKey(raw, variant);
    {
      std::lock_guard lock(mu_);
      if (auto it = map_.find(key); it != map_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        return it->second.table;
      }
    }
    STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const Table> table, build());
    std::lock_guard lock(mu_);
    ++builds_;
    if (map_.contains(key)) return table;
    lru_.push_front(key);
    map_.emplace(key, Entry{table, lru_.begin()});
    bytes_ += table->bytes;
    while (bytes_ > budget_ && lru_.size() > 1) {
      auto victim = map_.find(lru_.back());
      bytes_ -= victim->second.table->bytes;
      map_.erase(victim);
      lru_.pop_back();
    }
    return table;
  }

  Stats stats() const {
    std::lock_guard lock(mu_);
    return {map_.size(), bytes_, builds_};
  }

 private:
  struct Entry {
    std::shared_ptr<const Table> table;
    std::list<std::string>::iterator lru;
  };
  const uint64_t budget_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;  // guarded by mu_
  std::list<std::string> lru_;                  // guarded by mu_; front = newest
  uint64_t bytes_ = 0;                          // guarded by mu_
  uint64_t builds_ = 0;                         // guarded by mu_
};

template <class Codec>
class RestartReader final : public RandomAccessReader {
 public:
  using Point = typename Codec::Point;
  using Cursor = typename Codec::Cursor;
  using Table = RestartTable<Point>;

  RestartReader(std::unique_ptr<RandomAccessReader> raw, std::shared_ptr<const Table> table)
      : raw_(std::move(raw)), table_(std::move(table)) {}

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset >= table_->size || out.empty()) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), table_->size - offset));
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Cursor> c, TakeCursor(offset));
    std::vector<uint8_t> discard;
    while (c->out < offset) {
      if (discard.empty()) discard.resize(kDiscard);
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(kDiscard, offset - c->out));
      STOKER_RETURN_IF_ERROR(Codec::Decode(*raw_, *c, discard.data(), skip));
    }
    STOKER_RETURN_IF_ERROR(Codec::Decode(*raw_, *c, out.data(), n));
    GiveBack(std::move(c));
    return n;
  }
  uint64_t Size() const override { return table_->size; }
  const std::string& Name() const override { return raw_->Name(); }
  size_t PreferredReadSize() const override { return std::max<size_t>(raw_->PreferredReadSize(), 256 * 1024); }
  bool remote() const override { return raw_->remote(); }
  Status Damage() const override { return table_->damage; }
  const char* Compression() const override { return Codec::kName; }

 private:
  static constexpr size_t kDiscard = 64 * 1024;  // output thrown away per step while seeking forward
  static constexpr size_t kMaxCursors = 4;       // idle cursors kept per reader

  // The idle cursor closest below offset but not behind its restart point
  // (starting afresh is cheaper than decoding from farther back), else a new
  // one at that point.
  Result<std::unique_ptr<Cursor>> TakeCursor(uint64_t offset) const {
    const auto& pts = table_->points;
    auto it = std::upper_bound(pts.begin(), pts.end(), offset, [](uint64_t o, const Point& p) { return o < p.out; });
    const Point& p = *(it - 1);  // points[0].out == 0 <= offset
    {
      std::lock_guard lock(mu_);
      size_t best = cursors_.size();
      for (size_t i = 0; i < cursors_.size(); ++i) {
        const uint64_t at = cursors_[i]->out;
        if (at <= offset && at >= p.out && (best == cursors_.size() || at > cursors_[best]->out)) best = i;
      }
      if (best < cursors_.size()) {
        std::unique_ptr<Cursor> c = std::move(cursors_[best]);
        cursors_.erase(cursors_.begin() + static_cast<ptrdiff_t>(best));
        return c;
      }
    }
    return Codec::Start(*raw_, p);
  }

  void GiveBack(std::unique_ptr<Cursor> c) const {
    if (c->broken) return;
    std::lock_guard lock(mu_);
    if (cursors_.size() >= kMaxCursors) cursors_.erase(cursors_.begin());  // the oldest goes
    cursors_.push_back(std::move(c));
  }

  std::unique_ptr<RandomAccessReader> raw_;
  std::shared_ptr<const Table> table_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Cursor>> cursors_;  // guarded by mu_; idle, oldest first
};

}  // namespace stoker
