// tests/fuzz/megatron_index_fuzz.cc — the Megatron .idx readers
// (formats/megatron_index.h) on any bytes. MegatronDataset::Open: a clean
// error, or an index whose every sequence lies inside the .bin, the .bin
// ending where its furthest sequence does, with document indices from 0,
// ascending, to the sequence count; tokens are then copied out of the mapped
// .bin (a sequence past its end would fault). ReadMegatronSummary: a clean
// error, or the header's fields and the files' sizes, agreeing with Open.
//
// Input: 4 bytes (little-endian) size the .bin (zeros, a sparse file), the
// rest is the .idx. With the top bit set the .bin is as long as the .idx's
// sequences need (read here from the .idx; Open refuses any other size, so
// that mutations of the .idx still open); else the value mod 1 MiB. Both are
// files in a temp folder made once (Open appends .idx and .bin to a prefix,
// so a memfd will not do).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "formats/megatron_index.h"

namespace {

const std::string& Prefix() {
  static const std::string* prefix = [] {
    const char* shm = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(shm) + "/stoker-fuzz-megatron-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) abort();
    static std::string dir = tmpl;
    atexit([] {  // the folder goes when the fuzzer exits (a crash leaves it: a few bytes in /dev/shm)
      unlink((dir + "/d.idx").c_str());
      unlink((dir + "/d.bin").c_str());
      rmdir(dir.c_str());
    });
    return new std::string(tmpl + "/d");
  }();
  return *prefix;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size, uint64_t length) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) abort();
    done += static_cast<size_t>(n);
  }
  if (length > size && ::ftruncate(fd, static_cast<off_t>(length)) != 0) abort();
  ::close(fd);
}

// Where the .idx's furthest sequence ends in the .bin; 0 when the header
// does not parse or that is past 1 MiB (Open checks it all again).
uint32_t NeededBinBytes(const uint8_t* idx, size_t size) {
  if (size < stoker::kMegatronHeaderBytes) return 0;
  auto item = stoker::DTypeFromMegatronCode(idx[17]);
  if (!item.ok()) return 0;
  uint64_t seqs;
  std::memcpy(&seqs, idx + 18, 8);
  if (seqs > size || stoker::kMegatronHeaderBytes + 12 * seqs > size) return 0;
  uint64_t end = 0;
  for (uint64_t s = 0; s < seqs; ++s) {
    int32_t len;
    int64_t ptr;
    std::memcpy(&len, idx + stoker::kMegatronHeaderBytes + 4 * s, 4);
    std::memcpy(&ptr, idx + stoker::kMegatronHeaderBytes + 4 * seqs + 8 * s, 8);
    if (len < 0 || ptr < 0 || ptr > (1 << 20) || len > (1 << 20)) return 0;
    end = std::max(end, static_cast<uint64_t>(ptr) + stoker::DTypeSize(*item) * static_cast<uint64_t>(len));
  }
  return end <= (1u << 20) ? static_cast<uint32_t>(end) : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t bin_size;
  std::memcpy(&bin_size, data, 4);
  bin_size = bin_size >> 31 ? NeededBinBytes(data + 4, size - 4) : bin_size % (1u << 20);
  const std::string& prefix = Prefix();
  WriteFile(prefix + ".bin", nullptr, 0, bin_size);
  WriteFile(prefix + ".idx", data + 4, size - 4, 0);
  auto summary = stoker::ReadMegatronSummary(prefix);
  if (summary.ok() && (summary->idx_bytes != size - 4 || summary->bin_bytes != bin_size)) __builtin_trap();
  if (!summary.ok() && summary.status().message().empty()) __builtin_trap();
  auto opened = stoker::MegatronDataset::Open(prefix);
  if (!opened.ok()) {
    if (opened.status().message().empty()) __builtin_trap();  // an error says what is wrong
    return 0;
  }
  const stoker::MegatronDataset& d = **opened;
  const size_t seqs = d.num_sequences();
  const uint64_t item = d.token_bytes();
  if (d.bin_bytes() != bin_size || d.sequence_pointers().size() != seqs) __builtin_trap();
  // What the summary read of the header agrees with the whole read.
  if (!summary.ok() || summary->dtype != d.dtype() || summary->dtype_code != d.dtype_code() ||
      summary->sequences != seqs || summary->documents + 1 != d.document_indices().size()) {
    __builtin_trap();
  }
  uint64_t end = 0;
  for (size_t s = 0; s < seqs; ++s) {
    const int64_t len = d.sequence_lengths()[s], ptr = d.sequence_pointers()[s];
    if (len < 0 || ptr < 0 || static_cast<uint64_t>(ptr) > bin_size ||
        item * static_cast<uint64_t>(len) > bin_size - static_cast<uint64_t>(ptr)) {
      __builtin_trap();
    }
    end = std::max(end, static_cast<uint64_t>(ptr) + item * static_cast<uint64_t>(len));
  }
  if (end != bin_size) __builtin_trap();  // the .bin ends where its furthest sequence does
  const std::vector<int64_t>& docs = d.document_indices();
  if (docs.empty() || docs.front() != 0 || docs.back() != static_cast<int64_t>(seqs)) __builtin_trap();
  for (size_t i = 1; i < docs.size(); ++i) {
    if (docs[i] < docs[i - 1]) __builtin_trap();
  }
  // Read the first and last token of each sequence, up to 64 Ki tokens in all.
  std::vector<int64_t> out(2);
  size_t budget = 1 << 16;
  for (size_t s = 0; s < seqs && budget > 0; ++s) {
    const int64_t len = d.sequence_lengths()[s];
    if (len == 0) continue;
    if (!d.CopyTokens(s, 0, 1, out.data()).ok() || !d.CopyTokens(s, len - 1, 1, out.data() + 1).ok()) {
      __builtin_trap();
    }
    budget -= 2;
  }
  return 0;
}
