// pipeline/token_source.h — the sample space of a token loader: the
// memory-mapped Megatron datasets, megatron-core's GPT indices for each (built
// in C++ by gpt_indices.h, cached on disk and reused) and, for a weighted
// blend, the blending index. Fill(i) writes sample i of the top-level dataset
// (GPTDataset[i] or BlendedDataset[i]) straight into its batch slot as int64.
// Cache files: <cache_dir>/<fnv64 of the description>-gpt.idx.bin; the
// description (dataset path, .idx size and mtime, seed, seq_len, num_samples,
// split, extra token) is stored inside and compared before reuse.
// Thread-safety: immutable after Open; Fill from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/megatron_index.h"
#include "pipeline/gpt_indices.h"
#include "stoker/loader.h"

namespace stoker {

class TokenSource {
 public:
  // io: how remote .bin/.idx objects are reached (the loader's storage options).
  static Result<std::unique_ptr<TokenSource>> Open(const TokenOptions& options, uint64_t seed, const IoOptions& io);

  int64_t size() const { return size_; }                  // len() of the top-level dataset
  int sample_tokens() const { return sample_tokens_; }    // seq_len + add_extra_token
  // A weighted blend: batches carry each sample's dataset (DatasetOf).
  bool blended() const { return !dataset_index_.empty(); }
  // BlendedDataset.dataset_index[i]: the dataset sample i comes from (0 alone).
  int64_t DatasetOf(int64_t i) const { return dataset_index_.empty() ? 0 : dataset_index_[i]; }
  // Some .bin is read over HTTP/S3: each window costs round trips, not memcpy.
  bool remote() const { return remote_; }
  // Sample i, as GPTDataset[i]["tokens"] followed by its last label.
  Status Fill(int64_t i, int64_t* out) const;
  // Where an index came from: "built" or "cached", per dataset, and build seconds.
  const std::vector<std::string>& index_origin() const { return origin_; }
  double index_seconds() const { return index_seconds_; }

 private:
  struct Part {
    const MegatronDataset* data;
    GptIndices indices;
  };
  Status FillGpt(const Part& part, int64_t i, int64_t* out) const;

  std::vector<std::unique_ptr<MegatronDataset>> files_;
  std::vector<Part> parts_;
  std::vector<int16_t> dataset_index_;         // blend only
  std::vector<int64_t> dataset_sample_index_;  // blend only
  int64_t size_ = 0;
  int sample_tokens_ = 0;
  bool extra_token_ = true;
  bool remote_ = false;
  std::vector<std::string> origin_;
  double index_seconds_ = 0;
};

}  // namespace stoker
