// io/gzip_reader.cc — random access into gzip objects through access points;
// see gzip_reader.h. The access-point technique is zlib's examples/zran.c:
// a raw inflate restarted mid-stream needs the bit offset (inflatePrime) and
// the 32 KiB window (inflateSetDictionary) at a block boundary.
#include "io/gzip_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace stoker {

namespace {

constexpr size_t kWindow = 32768;        // deflate's largest back-reference distance
constexpr size_t kInChunk = 64 * 1024;   // compressed bytes per read of the raw object
constexpr size_t kDiscard = 32 * 1024;   // output thrown away while seeking forward
constexpr size_t kMaxCursors = 4;        // idle decompressors kept per reader

struct AccessPoint {
  uint64_t in;    // compressed offset of the first whole byte after the point
  uint64_t out;   // uncompressed offset
  int bits;       // bits of the byte before `in` that belong to the next block
  std::vector<uint8_t> window;  // up to 32 KiB of output before `out`
};

struct AccessTable {
  std::vector<AccessPoint> points;  // by increasing out; points[0].out == 0
  uint64_t size = 0;                // uncompressed bytes decoded before any fault
  Status damage;                    // what broke the stream, if anything
  uint64_t bytes() const {
    uint64_t b = sizeof(*this) + points.size() * sizeof(AccessPoint);
    for (const AccessPoint& p : points) b += p.window.size();
    return b;
  }
};

struct InflateDeleter {
  void operator()(z_stream* s) const {
    inflateEnd(s);
    delete s;
  }
};
using InflatePtr = std::unique_ptr<z_stream, InflateDeleter>;

Result<InflatePtr> NewInflate(int window_bits) {
  auto* s = new z_stream{};
  if (inflateInit2(s, window_bits) != Z_OK) {
    delete s;
    return Internal("zlib inflateInit2 failed");
  }
  return InflatePtr(s);
}

std::string ZMessage(const z_stream& s, const char* fallback) { return s.msg ? s.msg : fallback; }

// One pass over the whole object: the access points, the uncompressed size,
// and the first fault. Only I/O errors of the raw reader fail the build; a
// damaged stream is recorded in the table (gzip_reader.h says why).
Result<std::shared_ptr<const AccessTable>> BuildTable(const RandomAccessReader& raw, uint64_t span) {
  auto table = std::make_shared<AccessTable>();
  STOKER_ASSIGN_OR_RETURN(InflatePtr strm, NewInflate(15 + 16));  // gzip header and trailer checked
  const uint64_t csize = raw.Size();
  std::vector<uint8_t> in(kInChunk), win(kWindow);
  uint64_t read_off = 0, totin = 0, totout = 0, last = 0;
  bool member_end = false;
  strm->avail_out = 0;
  auto fault = [&](const std::string& what) {
    table->damage = DataLoss(raw.Name() + ": gzip " + what + " at compressed offset " + std::to_string(totin) +
                             " (uncompressed offset " + std::to_string(totout) + ")");
  };
  for (;;) {
    if (strm->avail_in == 0) {
      if (read_off >= csize) {
        if (!member_end) fault("stream truncated: the file ends inside a member");
        break;
      }
      const size_t want = static_cast<size_t>(std::min<uint64_t>(kInChunk, csize - read_off));
      STOKER_ASSIGN_OR_RETURN(size_t got, raw.ReadAt(read_off, {in.data(), want}));
      if (got == 0) {
        fault("stream truncated: the object ends early");
        break;
      }
      strm->next_in = in.data();
      strm->avail_in = static_cast<uInt>(got);
      read_off += got;
    }
    if (member_end) {
      // Between members: another member ("cat a.gz b.gz", pigz -i), zero
      // padding (as gzip -d accepts), or garbage, which is a fault.
      if (strm->next_in[0] == 0x1f) {
        inflateReset(strm.get());
        member_end = false;
      } else {
        while (strm->avail_in > 0 && strm->next_in[0] == 0) {
          ++strm->next_in;
          --strm->avail_in;
          ++totin;
        }
        if (strm->avail_in > 0) {
          fault("trailing data that is not a gzip member");
          break;
        }
        continue;
      }
    }
    if (strm->avail_out == 0) {
      strm->next_out = win.data();
      strm->avail_out = kWindow;
    }
    const uInt in_before = strm->avail_in, out_before = strm->avail_out;
    int ret = inflate(strm.get(), Z_BLOCK);
    totin += in_before - strm->avail_in;
    totout += out_before - strm->avail_out;
    if (ret == Z_MEM_ERROR) return Internal(raw.Name() + ": zlib out of memory");
    if (ret == Z_NEED_DICT || ret == Z_DATA_ERROR || ret == Z_STREAM_ERROR) {
      fault("data corrupt (" + ZMessage(*strm, "invalid deflate data") + ")");
      break;
    }
    if (ret == Z_STREAM_END) {
      member_end = true;
      continue;
    }
    // At a block boundary (bit 7), not after the last block (bit 6): a point
    // when the span since the last one is full, and one at the very start.
    const bool boundary = (strm->data_type & 128) && !(strm->data_type & 64);
    if (boundary && (table->points.empty() || totout - last >= span)) {
      AccessPoint p{totin, totout, strm->data_type & 7, {}};
      const size_t have = static_cast<size_t>(std::min<uint64_t>(totout, kWindow));
      const size_t pos = kWindow - strm->avail_out;  // next write position in the ring
      p.window.resize(have);
      // The last `have` output bytes end at pos in the ring.
      if (have <= pos) {
        std::copy(win.begin() + (pos - have), win.begin() + pos, p.window.begin());
      } else {
        const size_t tail = have - pos;
        std::copy(win.end() - tail, win.end(), p.window.begin());
        std::copy(win.begin(), win.begin() + pos, p.window.begin() + tail);
      }
      table->points.push_back(std::move(p));
      last = totout;
    }
  }
  if (table->points.empty()) table->points.push_back({0, 0, 0, {}});  // nothing decoded: reads see 0 bytes
  table->size = totout;
  return std::shared_ptr<const AccessTable>(std::move(table));
}

// ---- the process-wide table cache ------------------------------------------

struct CacheEntry {
  std::shared_ptr<const AccessTable> table;
  std::list<std::string>::iterator lru;
};

struct TableCache {
  std::mutex mu;
  std::unordered_map<std::string, CacheEntry> map;  // guarded by mu
  std::list<std::string> lru;                       // guarded by mu; front = newest
  uint64_t bytes = 0;                               // guarded by mu
  uint64_t builds = 0;                              // guarded by mu
  uint64_t budget = [] {
    const char* v = std::getenv("STOKER_GZIP_TABLE_CACHE_BYTES");
    return v && *v ? std::strtoull(v, nullptr, 10) : uint64_t{256} << 20;
  }();
};

TableCache& Cache() {
  static TableCache cache;
  return cache;
}

std::string CacheKey(const RandomAccessReader& raw, uint64_t span) {
  std::string key = raw.Name() + "\n" + std::to_string(raw.Size()) + "\n" + std::to_string(span);
  struct stat st{};
  if (!raw.remote() && stat(raw.Name().c_str(), &st) == 0) {
    key += "\n" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  return key;
}

Result<std::shared_ptr<const AccessTable>> TableFor(const RandomAccessReader& raw, uint64_t span) {
  TableCache& c = Cache();
  const std::string key = CacheKey(raw, span);
  {
    std::lock_guard lock(c.mu);
    auto it = c.map.find(key);
    if (it != c.map.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second.lru);
      return it->second.table;
    }
  }
  // Built outside the lock: a pass over a large shard must not stall other opens.
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const AccessTable> table, BuildTable(raw, span));
  std::lock_guard lock(c.mu);
  ++c.builds;
  if (c.map.contains(key)) return table;  // built twice at once: keep the first
  c.lru.push_front(key);
  c.map.emplace(key, CacheEntry{table, c.lru.begin()});
  c.bytes += table->bytes();
  while (c.bytes > c.budget && c.lru.size() > 1) {
    auto victim = c.map.find(c.lru.back());
    c.bytes -= victim->second.table->bytes();
    c.map.erase(victim);
    c.lru.pop_back();
  }
  return table;
}

// ---- reading --------------------------------------------------------------

// An inflate positioned at uncompressed offset `out`.
struct Cursor {
  InflatePtr strm;
  std::vector<uint8_t> in = std::vector<uint8_t>(kInChunk);
  uint64_t read_off = 0;  // next compressed byte to read into `in`
  uint64_t out = 0;
  bool raw_mode = true;   // a raw deflate stream (started at a point), else gzip framing
  bool member_end = false;  // inflate reached the end of a member
  bool broken = false;      // inflate met the stream's fault: not reusable
};

class GzipReader : public RandomAccessReader {
 public:
  GzipReader(std::unique_ptr<RandomAccessReader> raw, std::shared_ptr<const AccessTable> table)
      : raw_(std::move(raw)), table_(std::move(table)) {}

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset >= table_->size || out.empty()) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), table_->size - offset));
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Cursor> c, TakeCursor(offset));
    std::vector<uint8_t> discard;
    while (c->out < offset) {
      if (discard.empty()) discard.resize(kDiscard);
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(kDiscard, offset - c->out));
      STOKER_RETURN_IF_ERROR(Inflate(*c, discard.data(), skip));
    }
    STOKER_RETURN_IF_ERROR(Inflate(*c, out.data(), n));
    GiveBack(std::move(c));
    return n;
  }
  uint64_t Size() const override { return table_->size; }
  const std::string& Name() const override { return raw_->Name(); }
  size_t PreferredReadSize() const override { return std::max<size_t>(raw_->PreferredReadSize(), 256 * 1024); }
  bool remote() const override { return raw_->remote(); }
  Status Damage() const override { return table_->damage; }
  const char* Compression() const override { return "gzip"; }

 private:
  // The idle cursor closest below offset within a span, else a new one at the
  // last access point at or before offset.
  Result<std::unique_ptr<Cursor>> TakeCursor(uint64_t offset) const {
    const auto& pts = table_->points;
    auto it = std::upper_bound(pts.begin(), pts.end(), offset,
                               [](uint64_t o, const AccessPoint& p) { return o < p.out; });
    const AccessPoint& p = *(it - 1);  // points[0].out == 0 <= offset
    {
      std::lock_guard lock(mu_);
      size_t best = cursors_.size();
      for (size_t i = 0; i < cursors_.size(); ++i) {
        const uint64_t at = cursors_[i]->out;
        // Reuse only when it is no farther back than the access point.
        if (at <= offset && at >= p.out && (best == cursors_.size() || at > cursors_[best]->out)) best = i;
      }
      if (best < cursors_.size()) {
        std::unique_ptr<Cursor> c = std::move(cursors_[best]);
        cursors_.erase(cursors_.begin() + static_cast<ptrdiff_t>(best));
        return c;
      }
    }
    auto c = std::make_unique<Cursor>();
    STOKER_ASSIGN_OR_RETURN(c->strm, NewInflate(-15));
    c->read_off = p.in;
    if (p.bits) {
      uint8_t byte = 0;
      STOKER_RETURN_IF_ERROR(raw_->PRead(p.in - 1, {&byte, 1}));
      inflatePrime(c->strm.get(), p.bits, byte >> (8 - p.bits));
    }
    if (!p.window.empty()) {
      inflateSetDictionary(c->strm.get(), p.window.data(), static_cast<uInt>(p.window.size()));
    }
    c->out = p.out;
    return c;
  }

  void GiveBack(std::unique_ptr<Cursor> c) const {
    if (c->broken) return;
    std::lock_guard lock(mu_);
    if (cursors_.size() >= kMaxCursors) cursors_.erase(cursors_.begin());  // the oldest goes
    cursors_.push_back(std::move(c));
  }

  Status Refill(Cursor& c) const {
    const uint64_t csize = raw_->Size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kInChunk, csize > c.read_off ? csize - c.read_off : 0));
    size_t got = 0;
    if (want > 0) {
      STOKER_ASSIGN_OR_RETURN(got, raw_->ReadAt(c.read_off, {c.in.data(), want}));
    }
    if (got == 0) {
      return DataLoss(Name() + ": gzip stream ends at compressed offset " + std::to_string(c.read_off) +
                      " (uncompressed offset " + std::to_string(c.out) + "); the file changed since it was opened?");
    }
    c.strm->next_in = c.in.data();
    c.strm->avail_in = static_cast<uInt>(got);
    c.read_off += got;
    return Status::Ok();
  }

  // Exactly n bytes of output into dst (the caller stays below Size()).
  Status Inflate(Cursor& c, uint8_t* dst, size_t n) const {
    z_stream& s = *c.strm;
    s.next_out = dst;
    s.avail_out = static_cast<uInt>(n);
    while (s.avail_out > 0) {
      if (c.member_end) {
        // The member ended and more output is wanted: step over its trailer
        // (when the cursor began mid-member in raw mode) and any zero
        // padding, then parse the next member's header. Done lazily, so a
        // read that ends with the last member never looks past it.
        if (c.raw_mode) {
          for (int k = 0; k < 8; ++k) {
            if (s.avail_in == 0) STOKER_RETURN_IF_ERROR(Refill(c));
            ++s.next_in;
            --s.avail_in;
          }
        }
        for (;;) {
          if (s.avail_in == 0) STOKER_RETURN_IF_ERROR(Refill(c));
          if (s.next_in[0] != 0) break;
          ++s.next_in;
          --s.avail_in;
        }
        inflateReset2(&s, 15 + 16);
        c.raw_mode = false;
        c.member_end = false;
      }
      // At the end of the input zlib may still hold output (the rest of a
      // match, of a stored block): inflate with no input before giving up.
      Status refill = s.avail_in == 0 ? Refill(c) : Status::Ok();
      const uInt before = s.avail_out;
      const int ret = inflate(&s, Z_NO_FLUSH);
      c.out += before - s.avail_out;
      if (!refill.ok() && s.avail_out == before) return refill;
      if (ret == Z_STREAM_END) {
        c.member_end = true;
        continue;
      }
      if (ret != Z_OK && ret != Z_BUF_ERROR) {
        // A damaged stream's Size() ends where the table pass met the fault;
        // zlib may report it in the call that writes the last good byte.
        c.broken = true;
        if (s.avail_out == 0) break;
        return DataLoss(Name() + ": gzip data corrupt near uncompressed offset " + std::to_string(c.out) + " (" +
                        ZMessage(s, "inflate failed") + "); the file changed since it was opened?");
      }
    }
    return Status::Ok();
  }

  std::unique_ptr<RandomAccessReader> raw_;
  std::shared_ptr<const AccessTable> table_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Cursor>> cursors_;  // guarded by mu_; idle, oldest first
};

}  // namespace

bool IsGzipMagic(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

Result<std::unique_ptr<RandomAccessReader>> OpenGzipReader(std::unique_ptr<RandomAccessReader> raw, uint64_t span) {
  if (span == 0) return InvalidArgument("gzip access-point span must be positive");
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const AccessTable> table, TableFor(*raw, span));
  return std::unique_ptr<RandomAccessReader>(std::make_unique<GzipReader>(std::move(raw), std::move(table)));
}

GzipTableCacheStats GzipTableCache() {
  TableCache& c = Cache();
  std::lock_guard lock(c.mu);
  return {c.map.size(), c.bytes, c.builds};
}

}  // namespace stoker
