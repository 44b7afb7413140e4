// io/zstd_reader.cc — random access into zstd objects through frame starts;
// see zstd_reader.h. The structure follows io/gzip_reader.cc (one pass for
// the table, a shared table cache, a small pool of positioned decompressors).
#include "io/zstd_reader.h"

#include <sys/stat.h>
#include <zstd.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace stoker {

namespace {

constexpr size_t kMaxCursors = 4;
constexpr size_t kDiscard = 64 * 1024;
constexpr size_t kCacheTables = 4096;  // frame tables kept for reopening (16 bytes a frame)

struct FrameStart {
  uint64_t in;   // compressed offset of the frame's first byte
  uint64_t out;  // uncompressed offset of its first output byte
};

struct FrameTable {
  std::vector<FrameStart> starts;  // starts[0] = {0, 0}
  uint64_t size = 0;
  Status damage;
};

struct DctxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
using DctxPtr = std::unique_ptr<ZSTD_DCtx, DctxFree>;

Result<std::shared_ptr<const FrameTable>> BuildTable(const RandomAccessReader& raw) {
  auto table = std::make_shared<FrameTable>();
  DctxPtr dctx(ZSTD_createDCtx());
  if (!dctx) return Internal("ZSTD_createDCtx failed");
  const uint64_t csize = raw.Size();
  std::vector<uint8_t> in(ZSTD_DStreamInSize()), out(std::max<size_t>(ZSTD_DStreamOutSize(), kDiscard));
  uint64_t read_off = 0, consumed = 0, totout = 0;
  size_t last = 0;  // the last ZSTD_decompressStream result: 0 at a frame's end
  ZSTD_inBuffer ib{in.data(), 0, 0};
  table->starts.push_back({0, 0});
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
      if (totout > table->starts.back().out) table->starts.push_back({consumed, totout});
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
  return std::shared_ptr<const FrameTable>(std::move(table));
}

struct TableCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const FrameTable>> map;  // guarded by mu
  std::list<std::string> order;                                           // guarded by mu; oldest first
};

Result<std::shared_ptr<const FrameTable>> TableFor(const RandomAccessReader& raw) {
  static TableCache cache;
  std::string key = raw.Name() + "\n" + std::to_string(raw.Size());
  struct stat st{};
  if (!raw.remote() && stat(raw.Name().c_str(), &st) == 0) {
    key += "\n" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  {
    std::lock_guard lock(cache.mu);
    if (auto it = cache.map.find(key); it != cache.map.end()) return it->second;
  }
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const FrameTable> table, BuildTable(raw));
  std::lock_guard lock(cache.mu);
  if (cache.map.emplace(key, table).second) cache.order.push_back(key);
  while (cache.order.size() > kCacheTables) {
    cache.map.erase(cache.order.front());
    cache.order.pop_front();
  }
  return table;
}

struct Cursor {
  DctxPtr dctx{ZSTD_createDCtx()};
  std::vector<uint8_t> in = std::vector<uint8_t>(ZSTD_DStreamInSize());
  ZSTD_inBuffer ib{nullptr, 0, 0};
  uint64_t read_off = 0;
  uint64_t out = 0;
  bool broken = false;  // met the stream's fault: not reusable
};

class ZstdReader : public RandomAccessReader {
 public:
  ZstdReader(std::unique_ptr<RandomAccessReader> raw, std::shared_ptr<const FrameTable> table)
      : raw_(std::move(raw)), table_(std::move(table)) {}

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override {
    if (offset >= table_->size || out.empty()) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), table_->size - offset));
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Cursor> c, TakeCursor(offset));
    std::vector<uint8_t> discard;
    while (c->out < offset) {
      if (discard.empty()) discard.resize(kDiscard);
      const size_t skip = static_cast<size_t>(std::min<uint64_t>(kDiscard, offset - c->out));
      STOKER_RETURN_IF_ERROR(Decompress(*c, discard.data(), skip));
    }
    STOKER_RETURN_IF_ERROR(Decompress(*c, out.data(), n));
    GiveBack(std::move(c));
    return n;
  }
  uint64_t Size() const override { return table_->size; }
  const std::string& Name() const override { return raw_->Name(); }
  size_t PreferredReadSize() const override { return std::max<size_t>(raw_->PreferredReadSize(), 256 * 1024); }
  bool remote() const override { return raw_->remote(); }
  Status Damage() const override { return table_->damage; }
  const char* Compression() const override { return "zstd"; }

 private:
  Result<std::unique_ptr<Cursor>> TakeCursor(uint64_t offset) const {
    const auto& starts = table_->starts;
    auto it = std::upper_bound(starts.begin(), starts.end(), offset,
                               [](uint64_t o, const FrameStart& f) { return o < f.out; });
    const FrameStart& f = *(it - 1);
    {
      std::lock_guard lock(mu_);
      size_t best = cursors_.size();
      for (size_t i = 0; i < cursors_.size(); ++i) {
        const uint64_t at = cursors_[i]->out;
        if (at <= offset && at >= f.out && (best == cursors_.size() || at > cursors_[best]->out)) best = i;
      }
      if (best < cursors_.size()) {
        std::unique_ptr<Cursor> c = std::move(cursors_[best]);
        cursors_.erase(cursors_.begin() + static_cast<ptrdiff_t>(best));
        return c;
      }
    }
    auto c = std::make_unique<Cursor>();
    if (!c->dctx) return Internal("ZSTD_createDCtx failed");
    c->read_off = f.in;
    c->out = f.out;
    return c;
  }

  void GiveBack(std::unique_ptr<Cursor> c) const {
    if (c->broken) return;
    std::lock_guard lock(mu_);
    if (cursors_.size() >= kMaxCursors) cursors_.erase(cursors_.begin());
    cursors_.push_back(std::move(c));
  }

  // Exactly n bytes into dst (the caller stays below Size()).
  Status Decompress(Cursor& c, uint8_t* dst, size_t n) const {
    ZSTD_outBuffer ob{dst, n, 0};
    while (ob.pos < ob.size) {
      // At the end of the input the decoder may still hold output: call it
      // with no input before giving up.
      Status refill = Status::Ok();
      if (c.ib.pos == c.ib.size) {
        const uint64_t csize = raw_->Size();
        const size_t want = static_cast<size_t>(std::min<uint64_t>(c.in.size(), csize > c.read_off ? csize - c.read_off : 0));
        size_t got = 0;
        if (want > 0) {
          STOKER_ASSIGN_OR_RETURN(got, raw_->ReadAt(c.read_off, {c.in.data(), want}));
        }
        if (got == 0) {
          refill = DataLoss(Name() + ": zstd stream ends at compressed offset " + std::to_string(c.read_off) +
                            " (uncompressed offset " + std::to_string(c.out) + "); the file changed since it was opened?");
        } else {
          c.ib = {c.in.data(), got, 0};
          c.read_off += got;
        }
      }
      const size_t before = ob.pos;
      const size_t ret = ZSTD_decompressStream(c.dctx.get(), &ob, &c.ib);
      c.out += ob.pos - before;
      if (!refill.ok() && ob.pos == before && !ZSTD_isError(ret)) return refill;
      if (ZSTD_isError(ret)) {
        c.broken = true;  // as in gzip_reader.cc: the fault may come with the last good byte
        if (ob.pos == ob.size) break;
        return DataLoss(Name() + ": zstd data corrupt near uncompressed offset " + std::to_string(c.out) + " (" +
                        ZSTD_getErrorName(ret) + "); the file changed since it was opened?");
      }
    }
    return Status::Ok();
  }

  std::unique_ptr<RandomAccessReader> raw_;
  std::shared_ptr<const FrameTable> table_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Cursor>> cursors_;  // guarded by mu_; idle, oldest first
};

}  // namespace

bool IsZstdMagic(const uint8_t* p, size_t n) {
  return n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd;
}

Result<std::unique_ptr<RandomAccessReader>> OpenZstdReader(std::unique_ptr<RandomAccessReader> raw) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const FrameTable> table, TableFor(*raw));
  return std::unique_ptr<RandomAccessReader>(std::make_unique<ZstdReader>(std::move(raw), std::move(table)));
}

}  // namespace stoker
