// io/gzip_reader.cc — random access into gzip objects through access points;
// see gzip_reader.h. This file builds the table and is the codec that
// io/restart_reader.h drives. The access-point technique is zlib's examples/zran.c:
// a raw inflate restarted mid-stream needs the bit offset (inflatePrime) and
// the 32 KiB window (inflateSetDictionary) at a block boundary.
#include "io/gzip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "io/restart_reader.h"

namespace stoker {

namespace {

constexpr size_t kWindow = 32768;        // deflate's largest back-reference distance
constexpr size_t kInChunk = 64 * 1024;   // compressed bytes per read of the raw object

struct AccessPoint {
  uint64_t in;    // compressed offset of the first whole byte after the point
  uint64_t out;   // uncompressed offset
  int bits;       // bits of the byte before `in` that belong to the next block
  std::vector<uint8_t> window;  // up to 32 KiB of output before `out`
};

using GzipTable = RestartTable<AccessPoint>;

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
Result<std::shared_ptr<const GzipTable>> BuildTable(const RandomAccessReader& raw, uint64_t span) {
  auto table = std::make_shared<GzipTable>();
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
  table->bytes = sizeof(GzipTable) + table->points.size() * sizeof(AccessPoint);
  for (const AccessPoint& p : table->points) table->bytes += p.window.size();
  return std::shared_ptr<const GzipTable>(std::move(table));
}

// ---- reading: the codec io/restart_reader.h drives ------------------------

struct GzipCodec {
  static constexpr const char* kName = "gzip";
  using Point = AccessPoint;

  struct Cursor : RestartCursor {
    InflatePtr strm;
    bool raw_mode = true;     // a raw deflate stream (started at a point), else gzip framing
    bool member_end = false;  // inflate reached the end of a member
  };

  static Result<std::unique_ptr<Cursor>> Start(const RandomAccessReader& raw, const AccessPoint& p) {
    auto c = std::make_unique<Cursor>();
    c->in.resize(kInChunk);
    STOKER_ASSIGN_OR_RETURN(c->strm, NewInflate(-15));
    c->read_off = p.in;
    if (p.bits) {
      uint8_t byte = 0;
      STOKER_RETURN_IF_ERROR(raw.PRead(p.in - 1, {&byte, 1}));
      inflatePrime(c->strm.get(), p.bits, byte >> (8 - p.bits));
    }
    if (!p.window.empty()) {
      inflateSetDictionary(c->strm.get(), p.window.data(), static_cast<uInt>(p.window.size()));
    }
    c->out = p.out;
    return c;
  }

  static Status Refill(const RandomAccessReader& raw, Cursor& c) {
    STOKER_ASSIGN_OR_RETURN(size_t got, c.Refill(raw, kName));
    c.strm->next_in = c.in.data();
    c.strm->avail_in = static_cast<uInt>(got);
    return Status::Ok();
  }

  static Status Decode(const RandomAccessReader& raw, Cursor& c, uint8_t* dst, size_t n) {
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
            if (s.avail_in == 0) STOKER_RETURN_IF_ERROR(Refill(raw, c));
            ++s.next_in;
            --s.avail_in;
          }
        }
        for (;;) {
          if (s.avail_in == 0) STOKER_RETURN_IF_ERROR(Refill(raw, c));
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
      Status refill = s.avail_in == 0 ? Refill(raw, c) : Status::Ok();
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
        return DataLoss(raw.Name() + ": gzip data corrupt near uncompressed offset " + std::to_string(c.out) + " (" +
                        ZMessage(s, "inflate failed") + "); the file changed since it was opened?");
      }
    }
    return Status::Ok();
  }
};

RestartTableCache<GzipTable>& Tables() {
  static RestartTableCache<GzipTable> cache([] {
    const char* v = std::getenv("STOKER_GZIP_TABLE_CACHE_BYTES");
    return v && *v ? std::strtoull(v, nullptr, 10) : uint64_t{256} << 20;
  }());
  return cache;
}

}  // namespace

bool IsGzipMagic(const uint8_t* p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

Result<std::unique_ptr<RandomAccessReader>> OpenGzipReader(std::unique_ptr<RandomAccessReader> raw, uint64_t span) {
  if (span == 0) return InvalidArgument("gzip access-point span must be positive");
  const RandomAccessReader& r = *raw;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const GzipTable> table,
                          Tables().Get(r, "span " + std::to_string(span), [&] { return BuildTable(r, span); }));
  return std::unique_ptr<RandomAccessReader>(
      std::make_unique<RestartReader<GzipCodec>>(std::move(raw), std::move(table)));
}

GzipTableCacheStats GzipTableCache() {
  const auto s = Tables().stats();
  return {s.tables, s.bytes, s.builds};
}

}  // namespace stoker
