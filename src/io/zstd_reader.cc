// io/zstd_reader.cc — random access into zstd objects through frame starts;
// see zstd_reader.h. This file builds the table and is the codec that
// io/restart_reader.h drives (as io/gzip_reader.cc).
#include "io/zstd_reader.h"

#include <zstd.h>

#include <algorithm>
#include <vector>

#include "io/restart_reader.h"

namespace stoker {

namespace {


struct FrameStart {
  uint64_t in;   // compressed offset of the frame's first byte
  uint64_t out;  // uncompressed offset of its first output byte
};

using FrameTable = RestartTable<FrameStart>;  // points[0] = {0, 0}

struct DctxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
using DctxPtr = std::unique_ptr<ZSTD_DCtx, DctxFree>;

Result<std::shared_ptr<const FrameTable>> BuildTable(const RandomAccessReader& raw) {
  auto table = std::make_shared<FrameTable>();
  DctxPtr dctx(ZSTD_createDCtx());
  if (!dctx) return Internal("ZSTD_createDCtx failed");
  const uint64_t csize = raw.Size();
  std::vector<uint8_t> in(ZSTD_DStreamInSize()), out(ZSTD_DStreamOutSize());
  uint64_t read_off = 0, consumed = 0, totout = 0;
  size_t last = 0;  // the last ZSTD_decompressStream result: 0 at a frame's end
  ZSTD_inBuffer ib{in.data(), 0, 0};
  table->points.push_back({0, 0});
  bool fresh_frame = true;  // at a frame start: the next byte begins one
  auto fault = [&](const std::string& what) {
    table->damage = DataLoss(raw.Name() + ": zstd " + what + " at compressed offset " + std::to_string(consumed) +
                             " (uncompressed offset " + std::to_string(totout) + ")");
  };
  for (;;) {
    if (ib.pos == ib.size) {
      if (read_off >= csize) {
        if (last != 0) fault("stream truncated: the file ends inside a frame");
        break;
      }
      const size_t want = static_cast<size_t>(std::min<uint64_t>(in.size(), csize - read_off));
      STOKER_ASSIGN_OR_RETURN(size_t got, raw.ReadAt(read_off, {in.data(), want}));
      if (got == 0) {
        fault("stream truncated: the object ends early");
        break;
      }
      ib = {in.data(), got, 0};
      read_off += got;
    }
    if (fresh_frame) {
      // Only zstd frames (and skippable ones): libzstd may also decode the
      // pre-1.0 "legacy" formats, whose streaming decoders are not trusted here.
      uint8_t magic[4] = {};
      STOKER_RETURN_IF_ERROR(raw.PRead(consumed, {magic, std::min<size_t>(4, csize - consumed)}));
      const bool skippable = (magic[0] & 0xf0) == 0x50 && magic[1] == 0x2a && magic[2] == 0x4d && magic[3] == 0x18;
      if (csize - consumed < 4 || !(IsZstdMagic(magic, 4) || skippable)) {
        fault("data that does not start a zstd frame");
        break;
      }
      if (totout > table->points.back().out) table->points.push_back({consumed, totout});
    }
    fresh_frame = false;
    ZSTD_outBuffer ob{out.data(), out.size(), 0};
    const size_t before = ib.pos;
    last = ZSTD_decompressStream(dctx.get(), &ob, &ib);
    consumed += ib.pos - before;
    totout += ob.pos;
    if (ZSTD_isError(last)) {
      fault(std::string("data corrupt (") + ZSTD_getErrorName(last) + ")");
      break;
    }
    if (last == 0) fresh_frame = true;
  }
  table->size = totout;
  table->bytes = sizeof(FrameTable) + table->points.size() * sizeof(FrameStart);
  return std::shared_ptr<const FrameTable>(std::move(table));
}

// ---- reading: the codec io/restart_reader.h drives ------------------------

struct ZstdCodec {
  static constexpr const char* kName = "zstd";
  using Point = FrameStart;

  struct Cursor : RestartCursor {
    DctxPtr dctx{ZSTD_createDCtx()};
    ZSTD_inBuffer ib{nullptr, 0, 0};
  };

  static Result<std::unique_ptr<Cursor>> Start(const RandomAccessReader&, const FrameStart& f) {
    auto c = std::make_unique<Cursor>();
    if (!c->dctx) return Internal("ZSTD_createDCtx failed");
    c->in.resize(ZSTD_DStreamInSize());
    c->read_off = f.in;
    c->out = f.out;
    return c;
  }

  static Status Decode(const RandomAccessReader& raw, Cursor& c, uint8_t* dst, size_t n) {
    ZSTD_outBuffer ob{dst, n, 0};
    while (ob.pos < ob.size) {
      // At the end of the input the decoder may still hold output: call it
      // with no input before giving up.
      Status refill = Status::Ok();
      if (c.ib.pos == c.ib.size) {
        Result<size_t> got = c.Refill(raw, kName);
        if (got.ok()) {
          c.ib = {c.in.data(), *got, 0};
        } else {
          refill = got.status();
        }
      }
      const size_t before = ob.pos;
      const size_t ret = ZSTD_decompressStream(c.dctx.get(), &ob, &c.ib);
      c.out += ob.pos - before;
      if (!refill.ok() && ob.pos == before && !ZSTD_isError(ret)) return refill;
      if (ZSTD_isError(ret)) {
        c.broken = true;  // as in gzip_reader.cc: the fault may come with the last good byte
        if (ob.pos == ob.size) break;
        return DataLoss(raw.Name() + ": zstd data corrupt near uncompressed offset " + std::to_string(c.out) + " (" +
                        ZSTD_getErrorName(ret) + "); the file changed since it was opened?");
      }
    }
    return Status::Ok();
  }
};

RestartTableCache<FrameTable>& Tables() {
  static RestartTableCache<FrameTable> cache(uint64_t{64} << 20);  // 16 bytes a frame: millions of frames
  return cache;
}

}  // namespace

bool IsZstdMagic(const uint8_t* p, size_t n) {
  return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

Result<std::unique_ptr<RandomAccessReader>> OpenZstdReader(std::unique_ptr<RandomAccessReader> raw) {
  const RandomAccessReader& r = *raw;
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const FrameTable> table, Tables().Get(r, "", [&] { return BuildTable(r); }));
  return std::unique_ptr<RandomAccessReader>(
      std::make_unique<RestartReader<ZstdCodec>>(std::move(raw), std::move(table)));
}

}  // namespace stoker
