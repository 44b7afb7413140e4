// formats/zip.h — the ZIP container of .npz files.
//
// Reads the central directory (zip64 included: numpy writes zip64 local headers),
// extracts stored (method 0) and deflated (method 8, libdeflate) entries and
// checks their CRC-32. The writer makes archives that numpy.load and Python's
// zipfile read. Thread-safety: free functions; ZipWriter is single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;
  bool encrypted = false;  // listed, but ExtractZipEntry refuses it
};

Result<std::vector<ZipEntry>> ListZip(std::span<const uint8_t> zip);

// Writes entry's uncompressed bytes into out (exactly uncompressed_size).
Status ExtractZipEntry(std::span<const uint8_t> zip, const ZipEntry& entry, std::span<uint8_t> out);

// For a stored entry, the bytes in place (no copy); InvalidArgument otherwise.
Result<std::span<const uint8_t>> StoredZipEntryData(std::span<const uint8_t> zip, const ZipEntry& entry);

// Where the entry's (compressed) data starts in the archive, found through its
// local header; its CRC is not checked. For readers that place a stored entry's
// bytes elsewhere and check them with ZipCrc32 (pipeline/direct_arrays.h).
Result<uint64_t> ZipEntryDataOffset(std::span<const uint8_t> zip, const ZipEntry& entry);

// CRC-32 as ZIP stores it, continued from `crc` (0 to start).
uint32_t ZipCrc32(uint32_t crc, std::span<const uint8_t> bytes);

class ZipWriter {
 public:
  void Add(const std::string& name, std::span<const uint8_t> data, bool deflate);
  std::vector<uint8_t> Finish();

 private:
  std::vector<uint8_t> out_;
  std::vector<ZipEntry> entries_;
};

}  // namespace stoker
