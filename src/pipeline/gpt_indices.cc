// pipeline/gpt_indices.cc — see gpt_indices.h; comments name the megatron code ported.
#include "pipeline/gpt_indices.h"

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "core/numpy_random.h"

namespace stoker {

namespace {

// _build_document_index(documents, num_epochs, rng, separate_final_epoch=False)
std::vector<int32_t> DocumentIndex(int64_t doc_begin, int64_t doc_end, int32_t epochs, NumpyRandomState& rng) {
  const int64_t docs = doc_end - doc_begin;
  std::vector<int32_t> index(static_cast<size_t>(docs * epochs));
  for (int32_t e = 0; e < epochs; ++e)
    for (int64_t d = 0; d < docs; ++d) index[e * docs + d] = static_cast<int32_t>(doc_begin + d);
  rng.Shuffle(std::span<int32_t>(index));
  return index;
}

// helpers.cpp build_sample_idx, statement for statement.
std::vector<int64_t> SampleIndex(std::span<const int32_t> sizes, std::span<const int32_t> document_idx,
                                 int32_t seq_length, int32_t num_epochs, int64_t tokens_per_epoch,
                                 bool drop_last_partial_sequence, int add_extra) {
  int64_t num_samples;
  if (drop_last_partial_sequence) {
    num_samples = (num_epochs * tokens_per_epoch - add_extra) / seq_length;
  } else {
    num_samples = static_cast<int64_t>(
        std::ceil(static_cast<float>(num_epochs * tokens_per_epoch - add_extra) / static_cast<float>(seq_length)));
  }
  std::vector<int64_t> sample_idx(static_cast<size_t>(2 * (num_samples + 1)));
  int64_t sample_idx_index = 0;
  int64_t document_idx_index = 0;
  int64_t doc_offset = 0;
  sample_idx[0] = document_idx_index;
  sample_idx[1] = doc_offset;
  ++sample_idx_index;
  const int64_t last_document = static_cast<int64_t>(document_idx.size()) - 1;
  while (sample_idx_index <= num_samples) {
    int64_t remaining_seq_length = seq_length + add_extra;
    while (remaining_seq_length != 0) {
      const int32_t document_index = document_idx[document_idx_index];
      const int64_t document_length = sizes[document_index] - doc_offset;
      remaining_seq_length -= document_length;
      if (remaining_seq_length <= 0) {
        doc_offset += (remaining_seq_length + document_length - add_extra);
        remaining_seq_length = 0;
      } else {
        if (document_idx_index == last_document) {
          doc_offset = sizes[document_idx[document_idx_index]] - add_extra;
          break;
        }
        ++document_idx_index;
        doc_offset = 0;
      }
    }
    sample_idx[2 * sample_idx_index] = document_idx_index;
    sample_idx[2 * sample_idx_index + 1] = doc_offset;
    ++sample_idx_index;
  }
  return sample_idx;
}

// _build_shuffle_index: arange(0, n) shuffled, then arange(n, total) shuffled.
std::vector<int64_t> ShuffleIndex(int64_t num_samples, int64_t total_size, NumpyRandomState& rng) {
  std::vector<int64_t> index(static_cast<size_t>(total_size));
  std::iota(index.begin(), index.end(), 0);
  rng.Shuffle(std::span<int64_t>(index.data(), static_cast<size_t>(num_samples)));
  if (num_samples == total_size) return index;
  rng.Shuffle(std::span<int64_t>(index.data() + num_samples, static_cast<size_t>(total_size - num_samples)));
  return index;
}

double PairwiseSum(const double* a, int64_t n) {
  if (n < 8) {
    double res = 0.;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    int64_t i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

}  // namespace

Result<GptIndices> BuildGptIndices(std::span<const int32_t> sequence_lengths, int64_t doc_begin, int64_t doc_end,
                                   const GptIndexOptions& o) {
  if (o.seq_len <= 1) return InvalidArgument("seq_len must be above 1");
  if (doc_begin < 0 || doc_end > static_cast<int64_t>(sequence_lengths.size()) || doc_begin >= doc_end) {
    return InvalidArgument("the split selects no documents [" + std::to_string(doc_begin) + ", " +
                           std::to_string(doc_end) + ")");
  }
  const int add_extra = o.add_extra_token ? 1 : 0;
  int64_t tokens_per_epoch = 0;
  for (int64_t d = doc_begin; d < doc_end; ++d) tokens_per_epoch += sequence_lengths[d];
  if (tokens_per_epoch <= 1) return InvalidArgument("the documents hold no tokens");
  // _get_num_epochs
  int32_t num_epochs = 1;
  if (o.num_samples >= 0) {
    int64_t tokens = tokens_per_epoch;
    const int64_t requested = o.num_samples * o.seq_len + add_extra;
    while (tokens < requested) {
      ++num_epochs;
      tokens += tokens_per_epoch;
    }
  }
  GptIndices out;
  out.num_epochs = num_epochs;
  int64_t num_samples_sans_final_epoch = 0;
  if (num_epochs > 1) {
    num_samples_sans_final_epoch = ((num_epochs - 1) * tokens_per_epoch - add_extra) / o.seq_len;
    const int64_t from_final = o.num_samples - num_samples_sans_final_epoch;
    const int64_t per_epoch = (tokens_per_epoch - add_extra) / o.seq_len;
    if (from_final < 0 || from_final > per_epoch + 1) return Internal("megatron's final-epoch invariant fails");
    out.separate_final_epoch = from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }
  NumpyRandomState rng(o.seed);
  if (!out.separate_final_epoch) {
    out.document_index = DocumentIndex(doc_begin, doc_end, num_epochs, rng);
  } else {
    out.document_index = DocumentIndex(doc_begin, doc_end, num_epochs - 1, rng);
    std::vector<int32_t> last = DocumentIndex(doc_begin, doc_end, 1, rng);
    out.document_index.insert(out.document_index.end(), last.begin(), last.end());
  }
  out.sample_index = SampleIndex(sequence_lengths, out.document_index, o.seq_len, num_epochs, tokens_per_epoch,
                                 o.drop_last_partial, add_extra);
  const int64_t total = out.size();
  out.shuffle_index = ShuffleIndex(out.separate_final_epoch ? num_samples_sans_final_epoch : total, total, rng);
  return out;
}

Result<std::pair<int64_t, int64_t>> SplitRange(const std::string& split, int which, int64_t num_elements) {
  // parse_and_normalize_split: every run of [.0-9] is a number; pad to 3.
  std::vector<double> parts;
  for (size_t i = 0; i < split.size();) {
    if ((split[i] >= '0' && split[i] <= '9') || split[i] == '.') {
      size_t j = i;
      while (j < split.size() && ((split[j] >= '0' && split[j] <= '9') || split[j] == '.')) ++j;
      char* end = nullptr;
      const std::string token = split.substr(i, j - i);
      parts.push_back(std::strtod(token.c_str(), &end));
      if (end != token.c_str() + token.size()) return InvalidArgument("split '" + split + "' is not numbers");
      i = j;
    } else {
      ++i;
    }
  }
  if (parts.empty() || parts.size() > 3) return InvalidArgument("split '" + split + "' needs 1 to 3 numbers");
  while (parts.size() < 3) parts.push_back(0.0);
  std::vector<double> w = NormalizeWeights(parts);
  // convert_split_vector_to_split_matrix: bookends of the running sums.
  double lo = 0.0;
  for (int i = 0; i < which; ++i) lo = lo + w[i];
  const double hi = lo + w[which];
  if (hi <= lo) return std::pair<int64_t, int64_t>{0, 0};
  const double n = static_cast<double>(num_elements);
  // int(round(x)): Python rounds half to even, as nearbyint does by default.
  return std::pair<int64_t, int64_t>{static_cast<int64_t>(std::nearbyint(lo * n)),
                                     static_cast<int64_t>(std::nearbyint(hi * n))};
}

double NumpySum(std::span<const double> v) {
  if (v.empty()) return 0.0;
  // add.reduce starts from the first element and adds the rest pairwise.
  return v[0] + PairwiseSum(v.data() + 1, static_cast<int64_t>(v.size()) - 1);
}

std::vector<double> NormalizeWeights(std::span<const double> weights) {
  const double sum = NumpySum(weights);
  std::vector<double> out(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) out[i] = weights[i] / sum;
  return out;
}

BlendSizes PlanBlendSizes(std::span<const double> weights, int64_t size, double surplus) {
  BlendSizes out;
  std::vector<double> w = NormalizeWeights(weights);
  for (double x : w) {
    const double target = std::ceil(static_cast<double>(size) * x);
    out.target.push_back(static_cast<int64_t>(target));
    out.build.push_back(static_cast<int64_t>(std::ceil(target * (1 + surplus))));
    out.size += static_cast<int64_t>(target);
  }
  out.weights = NormalizeWeights(w);  // BlendedDataset normalizes once more
  return out;
}

void BuildBlendingIndices(std::span<const double> weights, int64_t size, std::vector<int16_t>* dataset_index,
                          std::vector<int64_t>* dataset_sample_index) {
  const size_t n = weights.size();
  dataset_index->assign(static_cast<size_t>(size), 0);
  if (dataset_sample_index != nullptr) dataset_sample_index->assign(static_cast<size_t>(size), 0);
  std::vector<int64_t> current(n, 0);
  for (int64_t s = 0; s < size; ++s) {
    const double sd = std::max(static_cast<double>(s), 1.0);
    size_t best = 0;
    double max_error = weights[0] * sd - static_cast<double>(current[0]);
    for (size_t d = 1; d < n; ++d) {
      const double error = weights[d] * sd - static_cast<double>(current[d]);
      if (error > max_error) {
        max_error = error;
        best = d;
      }
    }
    (*dataset_index)[s] = static_cast<int16_t>(best);
    if (dataset_sample_index != nullptr) (*dataset_sample_index)[s] = current[best];
    current[best] += 1;
  }
}

}  // namespace stoker
