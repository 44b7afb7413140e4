// pipeline/sequence_packing.h — SFT-style packing: whole documents placed
// into fixed-length rows (bins of seq_len tokens) by first-fit decreasing or
// best-fit decreasing, then each row filled with its documents' tokens, the
// position ids restarting at every document, document boundaries for varlen
// attention (cu_seqlens) and a loss mask from each document's prompt span.
// The plan depends only on the lengths, seq_len and the algorithm (ties go to
// the lower document id, then the lower row), so a row's contents are a pure
// function of its number: a run is exact and resumes from a row count.
// Thread-safety: a PackedRows is immutable after Create; Fill from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/megatron_index.h"

namespace stoker {

enum class PackAlgorithm { kFirstFitDecreasing, kBestFitDecreasing };

Result<PackAlgorithm> ParsePackAlgorithm(const std::string& name);  // "first_fit" | "best_fit"

// Rows as CSR: row r holds documents[row_offsets[r] .. row_offsets[r + 1]),
// in the order they were placed.
struct PackPlan {
  std::vector<int64_t> row_offsets = {0};
  std::vector<int64_t> documents;
  int64_t seq_len = 0;
  int64_t tokens = 0;  // document tokens packed (after truncation)
  int64_t rows() const { return static_cast<int64_t>(row_offsets.size()) - 1; }
  double padding_fraction() const {
    return rows() ? 1.0 - double(tokens) / (double(rows()) * double(seq_len)) : 0.0;
  }
};

// `lengths[d]` tokens per document. A document longer than seq_len is cut to
// its first seq_len tokens when `truncate`, else InvalidArgument naming it.
// Empty documents are left out of every row.
Result<PackPlan> PlanPacking(std::span<const int64_t> lengths, int64_t seq_len, PackAlgorithm algorithm,
                             bool truncate);

// One batch of packed rows, each [rows, seq_len] row-major unless said.
struct PackedBatch {
  std::vector<int64_t> tokens;        // pad_id after the last document
  std::vector<int64_t> labels;        // the next token of the same document; 0 where there is none
  std::vector<float> loss_mask;       // 1 where labels[t] is a response token of t's document
  std::vector<int64_t> position_ids;  // 0, 1, ... from each document's start; 0 on padding
  std::vector<int32_t> segment_ids;   // 1, 2, ... per document of the row; 0 on padding
  // Document boundaries over the batch flattened to rows * seq_len tokens
  // (flash-attention's varlen cu_seqlens): each document, and each row's
  // padding tail, is one segment; last entry rows * seq_len.
  std::vector<int32_t> cu_seqlens;
  int32_t max_seqlen = 0;
  std::vector<int64_t> row_documents;  // the documents of the rows, in order (CSR with row_document_offsets)
  std::vector<int64_t> row_document_offsets;
};

class PackedRows {
 public:
  // prompt_lengths: per document, the tokens at its start that are prompt
  // (no loss on predicting them); empty: every token is a response.
  static Result<std::unique_ptr<PackedRows>> Create(std::unique_ptr<MegatronDataset> data, int64_t seq_len,
                                                    PackAlgorithm algorithm, std::vector<int64_t> prompt_lengths,
                                                    bool truncate, int64_t pad_id);
  const PackPlan& plan() const { return plan_; }
  const MegatronDataset& data() const { return *data_; }
  // The rows `rows` (row numbers of the plan), in that order.
  Result<PackedBatch> Fill(std::span<const int64_t> rows) const;

 private:
  std::unique_ptr<MegatronDataset> data_;
  PackPlan plan_;
  std::vector<int64_t> prompt_;
  int64_t pad_id_ = 0;
};

}  // namespace stoker
