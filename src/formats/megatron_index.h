// formats/megatron_index.h — Megatron indexed datasets (`prefix.bin` + `prefix.idx`):
// the reader (both files memory-mapped, validated at open) and the writer.
// A remote prefix (http://, https://, s3://; io/reader.h) reads the .idx whole
// and the .bin through ranged reads instead of a map: CopyTokens then costs a
// request and can fail, which its Status carries.
//
// The .idx layout, as megatron-core 0.16.1 writes it (indexed_dataset.py):
//   b"MMIDIDX\x00\x00" | <Q version=1> | <B dtype code> | <Q sequence_count> |
//   <Q document_count> | int32 sequence_lengths[S] | int64 sequence_pointers[S]
//   (byte offsets into .bin) | int64 document_indices[D] (starts 0, ends S)
// dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
// 7 float32, 8 uint16 (floats are refused: they are not token ids).
// Open refuses a corrupt or mismatched pair with an error that names the
// file, the field and its byte offset; after Open every sequence lies inside
// .bin and .bin ends where its last sequence does (a .bin written in another
// dtype than the .idx names is refused, naming both), so CopyTokens needs no
// checks. The writer refuses to finish a pair without a single token.
// Thread-safety: a MegatronDataset is immutable after Open (any thread may
// read it); a MegatronWriter belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/file.h"
#include "io/reader.h"
#include "stoker/dtype.h"
#include "stoker/status.h"

namespace stoker {

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronHeaderBytes = 9 + 8 + 1 + 8 + 8;

// The dtype code megatron writes for `dtype`; 0 when it has none.
uint8_t MegatronDTypeCode(DType dtype);
// The token dtype of a code, or an error for unknown and float codes.
Result<DType> DTypeFromMegatronCode(uint8_t code);
// Smallest dtype holding ids in [0, max_id] as megatron's optimal_dtype would
// for a vocabulary of max_id + 1: uint16 below 65500, else int32.
DType MegatronTokenDType(int64_t max_id);

// What a resume state fingerprints of a pair: the .idx header and the two
// files' sizes, read without loading the index (a few bytes, also remote).
struct MegatronSummary {
  DType dtype = DType::kU16;
  uint8_t dtype_code = 0;
  uint64_t sequences = 0;
  uint64_t documents = 0;  // document_count - 1 (the last index is the end)
  uint64_t idx_bytes = 0;
  uint64_t bin_bytes = 0;
};
Result<MegatronSummary> ReadMegatronSummary(const std::string& prefix, const IoOptions& io = DefaultIoOptions());

class MegatronDataset {
 public:
  // `prefix` names the pair: prefix.idx and prefix.bin.
  static Result<std::unique_ptr<MegatronDataset>> Open(const std::string& prefix,
                                                       const IoOptions& io = DefaultIoOptions());
  ~MegatronDataset();
  MegatronDataset(const MegatronDataset&) = delete;
  MegatronDataset& operator=(const MegatronDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  DType dtype() const { return dtype_; }
  uint8_t dtype_code() const { return code_; }
  size_t token_bytes() const { return DTypeSize(dtype_); }
  size_t num_sequences() const { return lengths_.size(); }
  const std::vector<int32_t>& sequence_lengths() const { return lengths_; }
  const std::vector<int64_t>& sequence_pointers() const { return pointers_; }
  const std::vector<int64_t>& document_indices() const { return documents_; }
  uint64_t bin_bytes() const { return bin_size_; }

  // Writes n tokens of sequence `seq` from token `offset` as int64 into out.
  // Callers keep offset + n <= sequence_lengths()[seq]. Fails only for a
  // remote .bin (the read's error: URL, range, status, attempts).
  Status CopyTokens(size_t seq, int64_t offset, int64_t n, int64_t* out) const;

 private:
  MegatronDataset() = default;
  std::string prefix_;
  DType dtype_ = DType::kU16;
  uint8_t code_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> documents_;
  const uint8_t* bin_ = nullptr;  // mmap of prefix.bin (null when empty or remote)
  std::unique_ptr<RandomAccessReader> remote_bin_;  // a remote prefix's .bin
  uint64_t bin_size_ = 0;
};

// Writes prefix.bin while documents arrive; Finish writes prefix.idx. Each
// document is one sequence (as megatron's preprocess_data writes text).
class MegatronWriter {
 public:
  static Result<std::unique_ptr<MegatronWriter>> Create(const std::string& prefix, DType dtype);
  // Tokens outside the dtype's range are InvalidArgument (nothing written).
  Status AddDocument(std::span<const int64_t> tokens);
  Status Finish();
  uint64_t tokens() const { return tokens_; }

 private:
  MegatronWriter(std::string prefix, DType dtype, File bin) : prefix_(std::move(prefix)), dtype_(dtype), bin_(std::move(bin)) {}
  Status Flush();
  std::string prefix_;
  DType dtype_;
  File bin_;
  std::vector<uint8_t> buffer_;
  std::vector<int32_t> lengths_;
  uint64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace stoker
