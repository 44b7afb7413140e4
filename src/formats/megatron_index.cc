// formats/megatron_index.cc — see megatron_index.h.
#include "formats/megatron_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/url.h"

namespace stoker {

namespace {

std::string At(const std::string& path, const char* field, uint64_t offset) {
  return path + ": " + field + " at byte offset " + std::to_string(offset);
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Widen(const uint8_t* src, int64_t n, int64_t* out) {
  // memcpy loads: .bin pointers need not be aligned; the loop vectorizes.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    out[i] = static_cast<int64_t>(v);
  }
}

template <typename T>
bool Narrow(std::span<const int64_t> in, std::vector<uint8_t>& out) {
  const size_t base = out.size();
  out.resize(base + in.size() * sizeof(T));
  uint8_t* dst = out.data() + base;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        in[i] > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      out.resize(base);
      return false;
    }
    T v = static_cast<T>(in[i]);
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
  return true;
}

// A read-only mapping of a whole file; unmapped on destruction.
struct Mapping {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  static Result<Mapping> Of(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return IoError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return IoError(path + ": cannot stat: " + std::strerror(errno));
    }
    Mapping m;
    m.size = static_cast<uint64_t>(st.st_size);
    if (m.size > 0) {
      void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        return IoError(path + ": cannot mmap: " + std::strerror(errno));
      }
      m.data = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return m;
  }
};

}  // namespace

uint8_t MegatronDTypeCode(DType dtype) {
  switch (dtype) {
    case DType::kU8: return 1;
    case DType::kI8: return 2;
    case DType::kI16: return 3;
    case DType::kI32: return 4;
    case DType::kI64: return 5;
    case DType::kF64: return 6;
    case DType::kF32: return 7;
    case DType::kU16: return 8;
    default: return 0;
  }
}

Result<DType> DTypeFromMegatronCode(uint8_t code) {
  switch (code) {
    case 1: return DType::kU8;
    case 2: return DType::kI8;
    case 3: return DType::kI16;
    case 4: return DType::kI32;
    case 5: return DType::kI64;
    case 8: return DType::kU16;
    case 6:
    case 7: return InvalidArgument("dtype code " + std::to_string(code) + " is a float type, not token ids");
    default: return InvalidArgument("unknown dtype code " + std::to_string(code) + " (megatron knows 1..8)");
  }
}

DType MegatronTokenDType(int64_t max_id) { return max_id + 1 < 65500 ? DType::kU16 : DType::kI32; }

Result<MegatronSummary> ReadMegatronSummary(const std::string& prefix, const IoOptions& io) {
  const std::string idx_path = WithSuffix(prefix, ".idx");
  STOKER_ASSIGN_OR_RETURN(auto idx, OpenReader(idx_path, io));
  STOKER_ASSIGN_OR_RETURN(auto bin, OpenReader(WithSuffix(prefix, ".bin"), io));
  MegatronSummary out;
  out.idx_bytes = idx->Size();
  out.bin_bytes = bin->Size();
  if (out.idx_bytes < kMegatronHeaderBytes) {
    return DataLoss(idx_path + ": truncated header: " + std::to_string(out.idx_bytes) +
                    " bytes, the header alone is " + std::to_string(kMegatronHeaderBytes));
  }
  uint8_t head[kMegatronHeaderBytes];
  STOKER_RETURN_IF_ERROR(idx->PRead(0, head));
  if (std::memcmp(head, kMegatronMagic, sizeof(kMegatronMagic)) != 0) {
    return DataLoss(At(idx_path, "magic", 0) + ": not b\"MMIDIDX\\x00\\x00\" (not a megatron index)");
  }
  out.dtype_code = head[17];
  Result<DType> dtype = DTypeFromMegatronCode(out.dtype_code);
  if (!dtype.ok()) return DataLoss(At(idx_path, "dtype", 17) + ": " + dtype.status().message());
  out.dtype = *dtype;
  out.sequences = Load<uint64_t>(head + 18);
  const uint64_t docs = Load<uint64_t>(head + 26);
  out.documents = docs > 0 ? docs - 1 : 0;
  return out;
}

MegatronDataset::~MegatronDataset() {
  if (bin_ != nullptr) ::munmap(const_cast<uint8_t*>(bin_), bin_size_);
}

Result<std::unique_ptr<MegatronDataset>> MegatronDataset::Open(const std::string& prefix, const IoOptions& io) {
  const std::string idx_path = WithSuffix(prefix, ".idx");  // a URL's query kept after the name
  const std::string bin_path = WithSuffix(prefix, ".bin");
  const bool remote = IsRemoteUrl(prefix);
  Result<std::string> idx_text = remote ? ReadWholeObject(idx_path, io) : ReadWholeFile(idx_path);
  if (!idx_text.ok()) return idx_text.status();
  const std::string& idx = *idx_text;
  const auto* p = reinterpret_cast<const uint8_t*>(idx.data());
  const uint64_t size = idx.size();
  if (size < kMegatronHeaderBytes) {
    return DataLoss(idx_path + ": truncated header: " + std::to_string(size) + " bytes, the header alone is " +
                    std::to_string(kMegatronHeaderBytes));
  }
  if (std::memcmp(p, kMegatronMagic, sizeof(kMegatronMagic)) != 0) {
    return DataLoss(At(idx_path, "magic", 0) + ": not b\"MMIDIDX\\x00\\x00\" (not a megatron index)");
  }
  const uint64_t version = Load<uint64_t>(p + 9);
  if (version != 1) {
    return DataLoss(At(idx_path, "version", 9) + ": " + std::to_string(version) + ", only version 1 is known");
  }
  auto out = std::unique_ptr<MegatronDataset>(new MegatronDataset());
  out->prefix_ = prefix;
  out->code_ = p[17];
  Result<DType> dtype = DTypeFromMegatronCode(out->code_);
  if (!dtype.ok()) return DataLoss(At(idx_path, "dtype", 17) + ": " + dtype.status().message());
  out->dtype_ = *dtype;
  const uint64_t seqs = Load<uint64_t>(p + 18);
  const uint64_t docs = Load<uint64_t>(p + 26);
  const uint64_t lengths_at = kMegatronHeaderBytes;
  // Guard the products against overflow before comparing with the size.
  if (seqs > size || docs > size) {
    return DataLoss(At(idx_path, seqs > size ? "sequence_count" : "document_count", seqs > size ? 18 : 26) + ": " +
                    std::to_string(seqs > size ? seqs : docs) + " is more than the file's " + std::to_string(size) +
                    " bytes could hold (truncated or corrupt .idx)");
  }
  const uint64_t pointers_at = lengths_at + 4 * seqs;
  const uint64_t documents_at = pointers_at + 8 * seqs;
  const uint64_t end = documents_at + 8 * docs;
  if (end > size) {
    const char* field = size < pointers_at ? "sequence_lengths" : size < documents_at ? "sequence_pointers"
                                                                                        : "document_indices";
    const uint64_t at = size < pointers_at ? lengths_at : size < documents_at ? pointers_at : documents_at;
    return DataLoss(At(idx_path, field, at) + ": truncated .idx: " + std::to_string(seqs) + " sequences and " +
                    std::to_string(docs) + " document indices need " + std::to_string(end) + " bytes, the file has " +
                    std::to_string(size));
  }
  out->lengths_.resize(seqs);
  out->pointers_.resize(seqs);
  out->documents_.resize(docs);
  if (seqs) std::memcpy(out->lengths_.data(), p + lengths_at, 4 * seqs);
  if (seqs) std::memcpy(out->pointers_.data(), p + pointers_at, 8 * seqs);
  if (docs) std::memcpy(out->documents_.data(), p + documents_at, 8 * docs);

  Mapping bin;
  if (remote) {
    STOKER_ASSIGN_OR_RETURN(out->remote_bin_, OpenReader(bin_path, io));
    bin.size = out->remote_bin_->Size();
  } else {
    STOKER_ASSIGN_OR_RETURN(bin, Mapping::Of(bin_path));
  }
  out->bin_ = bin.data;
  out->bin_size_ = bin.size;
  const uint64_t item = DTypeSize(out->dtype_);
  uint64_t used = 0;    // the end of the furthest sequence in .bin
  uint64_t tokens = 0;  // the tokens the .idx describes
  for (uint64_t s = 0; s < seqs; ++s) {
    const int32_t len = out->lengths_[s];
    const int64_t ptr = out->pointers_[s];
    if (len < 0) {
      return DataLoss(At(idx_path, "sequence_lengths", lengths_at + 4 * s) + ": sequence " + std::to_string(s) +
                      " has negative length " + std::to_string(len));
    }
    if (ptr < 0) {
      return DataLoss(At(idx_path, "sequence_pointers", pointers_at + 8 * s) + ": sequence " + std::to_string(s) +
                      " has negative byte offset " + std::to_string(ptr));
    }
    // Unsigned: a pointer near 2^63 plus the length would overflow int64.
    const uint64_t span_end = static_cast<uint64_t>(ptr) + item * static_cast<uint64_t>(len);
    if (span_end > bin.size) {
      return DataLoss(At(idx_path, "sequence_pointers", pointers_at + 8 * s) + ": sequence " + std::to_string(s) +
                      " spans bytes [" + std::to_string(ptr) + ", " + std::to_string(span_end) + ") past the end of " +
                      bin_path + " (" + std::to_string(bin.size) + " bytes)");
    }
    used = std::max(used, static_cast<uint64_t>(ptr) + item * static_cast<uint64_t>(len));
    tokens += static_cast<uint64_t>(len);
  }
  // Every sequence lies inside .bin; the .bin must also end where the last
  // one does (megatron's builder writes them back to back). A .bin of
  // another dtype than the .idx names is longer or shorter by the width
  // ratio, and read as the .idx's dtype it is garbage (an int32 .bin read as
  // uint16: every other token 0).
  if (bin.size != used) {
    std::string other;
    for (const DType d : {DType::kU8, DType::kU16, DType::kI32, DType::kI64}) {
      if (DTypeSize(d) != item && tokens > 0 && bin.size == tokens * DTypeSize(d)) other = DTypeName(d);
    }
    std::string msg = bin_path + ": " + std::to_string(bin.size) + " bytes, but " + idx_path + " (dtype " +
                      DTypeName(out->dtype_) + ", code " + std::to_string(out->code_) + ") describes " +
                      std::to_string(tokens) + " tokens of " + std::to_string(item) + " bytes, ending at byte " +
                      std::to_string(used);
    if (!other.empty()) {
      msg += "; " + std::to_string(bin.size) + " bytes is " + std::to_string(tokens) + " tokens of " + other +
             ": the .bin was written as " + other + ", its .idx says " + DTypeName(out->dtype_);
    }
    return DataLoss(msg + ". Pair each .bin with the .idx written beside it (or write both again: stoker "
                          "pack-tokens, stoker.write_megatron)");
  }
  // document_indices: 0, ascending, last == sequence_count (megatron's invariant).
  if (docs == 0 || out->documents_[0] != 0 || out->documents_.back() != static_cast<int64_t>(seqs)) {
    return DataLoss(At(idx_path, "document_indices", documents_at) + ": counts disagree: " + std::to_string(docs) +
                    " document indices should run from 0 to sequence_count " + std::to_string(seqs) + ", found " +
                    (docs ? std::to_string(out->documents_[0]) + " .. " + std::to_string(out->documents_.back())
                          : std::string("none")));
  }
  for (uint64_t d = 1; d < docs; ++d) {
    if (out->documents_[d] < out->documents_[d - 1]) {
      return DataLoss(At(idx_path, "document_indices", documents_at + 8 * d) + ": not ascending (" +
                      std::to_string(out->documents_[d - 1]) + " then " + std::to_string(out->documents_[d]) + ")");
    }
  }
  return out;
}

Status MegatronDataset::CopyTokens(size_t seq, int64_t offset, int64_t n, int64_t* out) const {
  const uint64_t at = static_cast<uint64_t>(pointers_[seq] + offset * static_cast<int64_t>(token_bytes()));
  const uint8_t* src = bin_ + at;
  if (remote_bin_) {
    // One ranged read per window; int64 tokens land in place, narrower ones
    // go through a per-thread buffer and are widened as from the map.
    thread_local std::vector<uint8_t> buf;
    buf.resize(static_cast<size_t>(n) * token_bytes());
    STOKER_RETURN_IF_ERROR(remote_bin_->PRead(at, buf));
    src = buf.data();
  }
  switch (dtype_) {
    case DType::kU16: Widen<uint16_t>(src, n, out); break;
    case DType::kI32: Widen<int32_t>(src, n, out); break;
    case DType::kU8: Widen<uint8_t>(src, n, out); break;
    case DType::kI8: Widen<int8_t>(src, n, out); break;
    case DType::kI16: Widen<int16_t>(src, n, out); break;
    default: std::memcpy(out, src, static_cast<size_t>(n) * 8); break;
  }
  return Status::Ok();
}

Result<std::unique_ptr<MegatronWriter>> MegatronWriter::Create(const std::string& prefix, DType dtype) {
  if (MegatronDTypeCode(dtype) == 0 || dtype == DType::kF32 || dtype == DType::kF64) {
    return InvalidArgument(std::string("dtype ") + DTypeName(dtype) + " cannot hold megatron token ids");
  }
  STOKER_ASSIGN_OR_RETURN(File bin, File::OpenWrite(prefix + ".bin"));
  return std::unique_ptr<MegatronWriter>(new MegatronWriter(prefix, dtype, std::move(bin)));
}

Status MegatronWriter::AddDocument(std::span<const int64_t> tokens) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("a document of " + std::to_string(tokens.size()) + " tokens exceeds int32 lengths");
  }
  bool ok = true;
  switch (dtype_) {
    case DType::kU16: ok = Narrow<uint16_t>(tokens, buffer_); break;
    case DType::kI32: ok = Narrow<int32_t>(tokens, buffer_); break;
    case DType::kU8: ok = Narrow<uint8_t>(tokens, buffer_); break;
    case DType::kI8: ok = Narrow<int8_t>(tokens, buffer_); break;
    case DType::kI16: ok = Narrow<int16_t>(tokens, buffer_); break;
    default: ok = Narrow<int64_t>(tokens, buffer_); break;
  }
  if (!ok) {
    return InvalidArgument("document " + std::to_string(lengths_.size()) + " holds a token id outside " +
                           DTypeName(dtype_));
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += tokens.size();
  if (buffer_.size() >= (8u << 20)) return Flush();
  return Status::Ok();
}

Status MegatronWriter::Flush() {
  Status st = bin_.Write(buffer_);
  buffer_.clear();
  return st;
}

Status MegatronWriter::Finish() {
  if (finished_) return Status::Ok();
  finished_ = true;
  STOKER_RETURN_IF_ERROR(Flush());
  STOKER_RETURN_IF_ERROR(bin_.Close());
  // Refused here, not at the first load: a pair with no token has no sample
  // at any seq_len. The empty .bin goes; no .idx is written.
  if (tokens_ == 0) {
    std::error_code ec;
    std::filesystem::remove(prefix_ + ".bin", ec);
    return InvalidArgument(prefix_ + ".{bin,idx}: " +
                           (lengths_.empty() ? std::string("no documents were given")
                                             : std::to_string(lengths_.size()) + " documents, all empty") +
                           ": a megatron dataset needs at least one token; nothing was written (check the input "
                           "and, for JSON lines, the key that holds the ids)");
  }
  const uint64_t seqs = lengths_.size();
  std::vector<uint8_t> idx(kMegatronHeaderBytes + seqs * (4 + 8 + 8) + 8);
  uint8_t* p = idx.data();
  std::memcpy(p, kMegatronMagic, 9);
  const uint64_t version = 1;
  std::memcpy(p + 9, &version, 8);
  p[17] = MegatronDTypeCode(dtype_);
  const uint64_t docs = seqs + 1;
  std::memcpy(p + 18, &seqs, 8);
  std::memcpy(p + 26, &docs, 8);
  uint8_t* q = p + kMegatronHeaderBytes;
  if (seqs) std::memcpy(q, lengths_.data(), 4 * seqs);
  q += 4 * seqs;
  int64_t ptr = 0;
  for (uint64_t s = 0; s < seqs; ++s, q += 8) {
    std::memcpy(q, &ptr, 8);
    ptr += static_cast<int64_t>(lengths_[s]) * static_cast<int64_t>(DTypeSize(dtype_));
  }
  for (int64_t d = 0; d <= static_cast<int64_t>(seqs); ++d, q += 8) std::memcpy(q, &d, 8);
  return WriteWholeFile(prefix_ + ".idx", idx);
}

}  // namespace stoker
