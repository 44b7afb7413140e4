// formats/zip.cc — ZIP reading (central directory, zip64) and writing for .npz.
//
// Sizes always come from the central directory: numpy's savez writes local
// headers with force_zip64, whose 32-bit size fields read 0xFFFFFFFF. The local
// header is read only for its name and extra lengths, to find the data.
// Thread-safety: free functions; each thread keeps its own libdeflate
// decompressor. ZipWriter is single-threaded.
#include "formats/zip.h"

#include <libdeflate.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

namespace stoker {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kEocd64Sig = 0x06064b50;
constexpr uint32_t kEocd64LocatorSig = 0x07064b50;
constexpr size_t kEocdSize = 22;
constexpr size_t kLocalSize = 30;
constexpr size_t kCentralSize = 46;
constexpr uint32_t kMax32 = 0xffffffff;

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t U32(const uint8_t* p) { return U16(p) | (uint32_t{U16(p + 2)} << 16); }
uint64_t U64(const uint8_t* p) { return U32(p) | (uint64_t{U32(p + 4)} << 32); }

void Put16(std::vector<uint8_t>& o, uint16_t v) {
  o.push_back(static_cast<uint8_t>(v));
  o.push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(std::vector<uint8_t>& o, uint32_t v) {
  Put16(o, static_cast<uint16_t>(v));
  Put16(o, static_cast<uint16_t>(v >> 16));
}
void Put64(std::vector<uint8_t>& o, uint64_t v) {
  Put32(o, static_cast<uint32_t>(v));
  Put32(o, static_cast<uint32_t>(v >> 32));
}

Status Bad(const std::string& why) { return DataLoss("zip: " + why); }
std::string Entry(const ZipEntry& e) { return "zip entry '" + e.name + "': "; }

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};
struct CompressorFree {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};

// Applies a zip64 extended-information extra field (0x0001): it holds, in this
// order, only those values whose 32-bit (or 16-bit) fields are saturated.
Status ApplyZip64Extra(const uint8_t* extra, size_t n, ZipEntry* e, bool offset_saturated) {
  const bool want_u = e->uncompressed_size == kMax32, want_c = e->compressed_size == kMax32;
  while (n >= 4) {
    uint16_t id = U16(extra), len = U16(extra + 2);
    if (len > n - 4) return Bad(Entry(*e) + "extra field runs past its header");
    if (id == 0x0001) {
      const uint8_t* p = extra + 4;
      size_t left = len;
      auto take = [&](uint64_t* v) {
        if (left < 8) return false;
        *v = U64(p);
        p += 8;
        left -= 8;
        return true;
      };
      if ((want_u && !take(&e->uncompressed_size)) || (want_c && !take(&e->compressed_size)) ||
          (offset_saturated && !take(&e->local_header_offset))) {
        return Bad(Entry(*e) + "zip64 extra field too short");
      }
      return Status::Ok();
    }
    extra += 4 + len;
    n -= 4 + len;
  }
  if (want_u || want_c || offset_saturated) {
    return Bad(Entry(*e) + "saturated size or offset without a zip64 extra field");
  }
  return Status::Ok();
}

// The entry's compressed bytes: located through its local header.
Result<std::span<const uint8_t>> EntryData(std::span<const uint8_t> zip, const ZipEntry& e) {
  const uint64_t lho = e.local_header_offset;
  if (lho > zip.size() || zip.size() - lho < kLocalSize || U32(zip.data() + lho) != kLocalSig) {
    return Bad(Entry(e) + "no local header at offset " + std::to_string(lho));
  }
  const uint8_t* h = zip.data() + lho;
  const uint64_t data = lho + kLocalSize + U16(h + 26) + U16(h + 28);
  if (data > zip.size() || e.compressed_size > zip.size() - data) {
    return Bad(Entry(e) + std::to_string(e.compressed_size) + " bytes of data at offset " + std::to_string(data) +
               " run past the end of the archive (" + std::to_string(zip.size()) + " bytes)");
  }
  return zip.subspan(static_cast<size_t>(data), static_cast<size_t>(e.compressed_size));
}

Status CheckCrc(const ZipEntry& e, std::span<const uint8_t> bytes) {
  uint32_t crc = libdeflate_crc32(0, bytes.data(), bytes.size());
  if (crc != e.crc32) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "CRC-32 mismatch (stored %08x, computed %08x)", e.crc32, crc);
    return Bad(Entry(e) + buf);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<ZipEntry>> ListZip(std::span<const uint8_t> zip) {
  if (zip.size() < kEocdSize) return Bad("too small to be a zip archive (" + std::to_string(zip.size()) + " bytes)");
  // The end record sits before a comment of up to 64 KiB; take the last
  // signature whose comment length reaches no further than the end.
  const uint8_t* eocd = nullptr;
  const size_t lowest = zip.size() > kEocdSize + 0xffff ? zip.size() - kEocdSize - 0xffff : 0;
  for (size_t pos = zip.size() - kEocdSize + 1; pos-- > lowest;) {
    const uint8_t* p = zip.data() + pos;
    if (U32(p) == kEocdSig && pos + kEocdSize + U16(p + 20) <= zip.size()) {
      eocd = p;
      break;
    }
  }
  if (!eocd) return Bad("no end of central directory record (not a zip archive, or truncated)");
  const size_t eocd_pos = static_cast<size_t>(eocd - zip.data());
  uint64_t count = U16(eocd + 10), cd_size = U32(eocd + 12), cd_offset = U32(eocd + 16);
  if (U16(eocd + 4) != 0 || U16(eocd + 6) != 0) return Bad("multi-disk archives are not supported");

  if (count == 0xffff || cd_size == kMax32 || cd_offset == kMax32) {
    if (eocd_pos < 20 || U32(eocd - 20) != kEocd64LocatorSig) {
      return Bad("end record has saturated fields but no zip64 locator");
    }
    const uint64_t rec = U64(eocd - 20 + 8);
    if (rec > eocd_pos || eocd_pos - rec < 56 || U32(zip.data() + rec) != kEocd64Sig) {
      return Bad("zip64 end of central directory record missing at offset " + std::to_string(rec));
    }
    const uint8_t* z = zip.data() + rec;
    count = U64(z + 32);
    cd_size = U64(z + 40);
    cd_offset = U64(z + 48);
  }
  if (cd_offset > zip.size() || cd_size > zip.size() - cd_offset) {
    return Bad("central directory (" + std::to_string(cd_size) + " bytes at offset " + std::to_string(cd_offset) +
               ") runs past the end of the archive");
  }
  if (count > cd_size / kCentralSize) return Bad("entry count " + std::to_string(count) + " exceeds the directory");

  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<size_t>(count));
  const uint8_t* p = zip.data() + cd_offset;
  const uint8_t* end = p + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = static_cast<uint64_t>(p - zip.data());
    if (static_cast<size_t>(end - p) < kCentralSize || U32(p) != kCentralSig) {
      return Bad("central directory entry #" + std::to_string(i) + " at offset " + std::to_string(at) +
                 " is malformed");
    }
    const size_t name_len = U16(p + 28), extra_len = U16(p + 30), comment_len = U16(p + 32);
    if (static_cast<size_t>(end - p) < kCentralSize + name_len + extra_len + comment_len) {
      return Bad("central directory entry #" + std::to_string(i) + " at offset " + std::to_string(at) +
                 " runs past the directory");
    }
    ZipEntry e;
    e.name.assign(reinterpret_cast<const char*>(p + kCentralSize), name_len);
    e.method = U16(p + 10);
    e.crc32 = U32(p + 16);
    e.compressed_size = U32(p + 20);
    e.uncompressed_size = U32(p + 24);
    e.local_header_offset = U32(p + 42);
    STOKER_RETURN_IF_ERROR(
        ApplyZip64Extra(p + kCentralSize + name_len, extra_len, &e, e.local_header_offset == kMax32));
    e.encrypted = U16(p + 8) & 1;
    entries.push_back(std::move(e));
    p += kCentralSize + name_len + extra_len + comment_len;
  }
  return entries;
}

Status ExtractZipEntry(std::span<const uint8_t> zip, const ZipEntry& entry, std::span<uint8_t> out) {
  if (out.size() != entry.uncompressed_size) {
    return InvalidArgument(Entry(entry) + "output holds " + std::to_string(out.size()) + " bytes, entry has " +
                           std::to_string(entry.uncompressed_size));
  }
  STOKER_ASSIGN_OR_RETURN(std::span<const uint8_t> data, EntryData(zip, entry));
  if (entry.encrypted) return InvalidArgument(Entry(entry) + "encrypted entries are not supported");
  if (entry.method == 0) {
    if (entry.compressed_size != entry.uncompressed_size) {
      return Bad(Entry(entry) + "stored entry with differing sizes");
    }
    if (!data.empty()) std::memcpy(out.data(), data.data(), data.size());
  } else if (entry.method == 8) {
    thread_local std::unique_ptr<libdeflate_decompressor, DecompressorFree> dec(libdeflate_alloc_decompressor());
    if (!dec) return Internal("libdeflate_alloc_decompressor failed");
    // A null actual-size pointer makes libdeflate insist on exactly out.size().
    libdeflate_result r =
        libdeflate_deflate_decompress(dec.get(), data.data(), data.size(), out.data(), out.size(), nullptr);
    if (r != LIBDEFLATE_SUCCESS) {
      const char* why = r == LIBDEFLATE_BAD_DATA            ? "corrupt deflate stream"
                        : r == LIBDEFLATE_SHORT_OUTPUT      ? "inflates to fewer bytes than the directory says"
                        : r == LIBDEFLATE_INSUFFICIENT_SPACE ? "inflates to more bytes than the directory says"
                                                             : "inflate failed";
      return Bad(Entry(entry) + why);
    }
  } else {
    return InvalidArgument(Entry(entry) + "compression method " + std::to_string(entry.method) +
                           " is not supported (only stored and deflated)");
  }
  return CheckCrc(entry, out);
}

Result<std::span<const uint8_t>> StoredZipEntryData(std::span<const uint8_t> zip, const ZipEntry& entry) {
  if (entry.encrypted) return InvalidArgument(Entry(entry) + "encrypted entries are not supported");
  if (entry.method != 0 || entry.compressed_size != entry.uncompressed_size) {
    return InvalidArgument(Entry(entry) + "is compressed; extract it instead");
  }
  STOKER_ASSIGN_OR_RETURN(std::span<const uint8_t> data, EntryData(zip, entry));
  STOKER_RETURN_IF_ERROR(CheckCrc(entry, data));
  return data;
}

Result<uint64_t> ZipEntryDataOffset(std::span<const uint8_t> zip, const ZipEntry& entry) {
  STOKER_ASSIGN_OR_RETURN(std::span<const uint8_t> data, EntryData(zip, entry));
  return static_cast<uint64_t>(data.data() - zip.data());
}

uint32_t ZipCrc32(uint32_t crc, std::span<const uint8_t> bytes) {
  return libdeflate_crc32(crc, bytes.data(), bytes.size());
}

// ---------------------------------------------------------------------------

void ZipWriter::Add(const std::string& name, std::span<const uint8_t> data, bool deflate) {
  ZipEntry e;
  e.name = name;
  e.crc32 = libdeflate_crc32(0, data.data(), data.size());
  e.uncompressed_size = data.size();
  e.local_header_offset = out_.size();

  std::vector<uint8_t> packed;
  if (deflate && !data.empty()) {
    std::unique_ptr<libdeflate_compressor, CompressorFree> comp(libdeflate_alloc_compressor(6));
    if (comp) {
      packed.resize(libdeflate_deflate_compress_bound(comp.get(), data.size()));
      packed.resize(libdeflate_deflate_compress(comp.get(), data.data(), data.size(), packed.data(), packed.size()));
    }
  }
  // Keep the deflated form only when it saves space, as zip tools do.
  const bool deflated = !packed.empty() && packed.size() < data.size();
  e.method = deflated ? 8 : 0;
  e.compressed_size = deflated ? packed.size() : data.size();

  // zip64 only where a value does not fit, so small archives stay plain zip32.
  const bool big = e.uncompressed_size >= kMax32 || e.compressed_size >= kMax32;
  const bool utf8 = std::any_of(name.begin(), name.end(), [](char c) { return static_cast<uint8_t>(c) >= 0x80; });
  Put32(out_, kLocalSig);
  Put16(out_, big ? 45 : 20);         // version needed
  Put16(out_, utf8 ? 0x0800 : 0);     // flags: bit 11, UTF-8 name
  Put16(out_, e.method);
  Put16(out_, 0);                     // time 00:00:00
  Put16(out_, (0 << 9) | (1 << 5) | 1);  // date 1980-01-01: fixed, so output is reproducible
  Put32(out_, e.crc32);
  Put32(out_, big ? kMax32 : static_cast<uint32_t>(e.compressed_size));
  Put32(out_, big ? kMax32 : static_cast<uint32_t>(e.uncompressed_size));
  Put16(out_, static_cast<uint16_t>(name.size()));
  Put16(out_, big ? 20 : 0);
  out_.insert(out_.end(), name.begin(), name.end());
  if (big) {
    Put16(out_, 0x0001);
    Put16(out_, 16);
    Put64(out_, e.uncompressed_size);
    Put64(out_, e.compressed_size);
  }
  if (deflated) {
    out_.insert(out_.end(), packed.begin(), packed.end());
  } else {
    out_.insert(out_.end(), data.begin(), data.end());
  }
  entries_.push_back(std::move(e));
}

std::vector<uint8_t> ZipWriter::Finish() {
  const uint64_t cd_offset = out_.size();
  for (const ZipEntry& e : entries_) {
    std::vector<uint8_t> extra;
    const bool u64 = e.uncompressed_size >= kMax32, c64 = e.compressed_size >= kMax32,
               o64 = e.local_header_offset >= kMax32;
    if (u64) Put64(extra, e.uncompressed_size);
    if (c64) Put64(extra, e.compressed_size);
    if (o64) Put64(extra, e.local_header_offset);
    const bool utf8 = std::any_of(e.name.begin(), e.name.end(), [](char c) { return static_cast<uint8_t>(c) >= 0x80; });
    Put32(out_, kCentralSig);
    Put16(out_, (3 << 8) | 45);  // made by: Unix, so the mode below is honoured
    Put16(out_, extra.empty() ? 20 : 45);
    Put16(out_, utf8 ? 0x0800 : 0);
    Put16(out_, e.method);
    Put16(out_, 0);
    Put16(out_, (0 << 9) | (1 << 5) | 1);
    Put32(out_, e.crc32);
    Put32(out_, c64 ? kMax32 : static_cast<uint32_t>(e.compressed_size));
    Put32(out_, u64 ? kMax32 : static_cast<uint32_t>(e.uncompressed_size));
    Put16(out_, static_cast<uint16_t>(e.name.size()));
    Put16(out_, static_cast<uint16_t>(extra.empty() ? 0 : extra.size() + 4));
    Put16(out_, 0);  // comment
    Put16(out_, 0);  // disk
    Put16(out_, 0);  // internal attributes
    Put32(out_, 0100644u << 16);  // external attributes: a regular file, rw-r--r--
    Put32(out_, o64 ? kMax32 : static_cast<uint32_t>(e.local_header_offset));
    out_.insert(out_.end(), e.name.begin(), e.name.end());
    if (!extra.empty()) {
      Put16(out_, 0x0001);
      Put16(out_, static_cast<uint16_t>(extra.size()));
      out_.insert(out_.end(), extra.begin(), extra.end());
    }
  }
  const uint64_t cd_size = out_.size() - cd_offset;
  const uint64_t count = entries_.size();
  if (count >= 0xffff || cd_size >= kMax32 || cd_offset >= kMax32) {
    const uint64_t rec = out_.size();
    Put32(out_, kEocd64Sig);
    Put64(out_, 44);  // size of the rest of this record
    Put16(out_, (3 << 8) | 45);
    Put16(out_, 45);
    Put32(out_, 0);
    Put32(out_, 0);
    Put64(out_, count);
    Put64(out_, count);
    Put64(out_, cd_size);
    Put64(out_, cd_offset);
    Put32(out_, kEocd64LocatorSig);
    Put32(out_, 0);
    Put64(out_, rec);
    Put32(out_, 1);
  }
  Put32(out_, kEocdSig);
  Put16(out_, 0);
  Put16(out_, 0);
  Put16(out_, static_cast<uint16_t>(std::min<uint64_t>(count, 0xffff)));
  Put16(out_, static_cast<uint16_t>(std::min<uint64_t>(count, 0xffff)));
  Put32(out_, static_cast<uint32_t>(std::min<uint64_t>(cd_size, kMax32)));
  Put32(out_, static_cast<uint32_t>(std::min<uint64_t>(cd_offset, kMax32)));
  Put16(out_, 0);
  entries_.clear();
  return std::exchange(out_, {});
}

}  // namespace stoker
