// pipeline/gpt_indices.h — megatron-core's GPT and blend indices, as pure functions.
//
// Ports of megatron-core 0.16.1 (gpt_dataset.py `_build_document_sample_shuffle_indices`,
// `_build_document_index`, `_build_shuffle_index`, `_get_num_epochs`; helpers.cpp
// `build_sample_idx` and `build_blending_indices`; blended_megatron_dataset_builder
// `_get_size_per_split_per_dataset`; the split string of
// blended_megatron_dataset_config), written so that for the same inputs every
// array equals megatron's value for value. The shuffles draw from
// NumpyRandomState in megatron's order: document index (two shuffles when the
// final epoch is separated), then the shuffle index (one or two).
// Thread-safety: free functions on values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "stoker/status.h"

namespace stoker {

struct GptIndexOptions {
  int32_t seq_len = 2048;
  int64_t num_samples = -1;        // <0: one epoch (megatron's num_samples=None)
  uint32_t seed = 1234;
  bool add_extra_token = true;     // add_extra_token_to_sequence
  bool drop_last_partial = true;   // drop_last_partial_sequence (train split: true)
};

struct GptIndices {
  std::vector<int32_t> document_index;
  std::vector<int64_t> sample_index;   // [num_samples + 1][2]: (document_index position, offset)
  std::vector<int64_t> shuffle_index;
  int32_t num_epochs = 1;
  bool separate_final_epoch = false;
  int64_t size() const { return static_cast<int64_t>(sample_index.size() / 2) - 1; }  // len(GPTDataset)
};

// Documents [doc_begin, doc_end) of `sequence_lengths` (a split of the dataset).
Result<GptIndices> BuildGptIndices(std::span<const int32_t> sequence_lengths, int64_t doc_begin, int64_t doc_end,
                                   const GptIndexOptions& options);

// The document range of split `which` (0 train, 1 valid, 2 test) for a split
// string such as "969,30,1" over num_elements sequences; empty when the split is.
Result<std::pair<int64_t, int64_t>> SplitRange(const std::string& split, int which, int64_t num_elements);

// numpy.sum of a float64 array (pairwise summation, as numpy adds).
double NumpySum(std::span<const double> v);
// megatron.core.datasets.utils.normalize.
std::vector<double> NormalizeWeights(std::span<const double> weights);

// What megatron's builder makes of a weighted blend of `size` samples: the
// blend's own weights, the samples used per dataset (their sum is the blend's
// size) and the samples built per dataset (with the 0.005 surplus).
struct BlendSizes {
  std::vector<double> weights;
  std::vector<int64_t> target;
  std::vector<int64_t> build;
  int64_t size = 0;
};
BlendSizes PlanBlendSizes(std::span<const double> weights, int64_t size, double surplus = 0.005);

// helpers.cpp build_blending_indices: greedy, largest sampling error first.
// dataset_sample_index may be null (only the dataset of each sample wanted).
void BuildBlendingIndices(std::span<const double> weights, int64_t size, std::vector<int16_t>* dataset_index,
                          std::vector<int64_t>* dataset_sample_index);

}  // namespace stoker
