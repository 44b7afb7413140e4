#include "pipeline/sequence_packing.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>

namespace stoker {

Result<PackAlgorithm> ParsePackAlgorithm(const std::string& name) {
  if (name == "first_fit") return PackAlgorithm::kFirstFitDecreasing;
  if (name == "best_fit") return PackAlgorithm::kBestFitDecreasing;
  return InvalidArgument("packing algorithm '" + name + "': choose first_fit or best_fit");
}

namespace {

// First fit over bins in opening order: a max tree over every possible bin's
// room (a bin not yet opened has all seq_len), so the leftmost leaf with room
// >= need is the first open bin that fits, or else the next new one.
// O(log n) per document instead of a scan over the open bins.
class FirstFitTree {
 public:
  FirstFitTree(size_t bins, int64_t room) {
    while (size_ < bins) size_ *= 2;
    tree_.assign(2 * size_, room);
    for (size_t i = size_ + bins; i < 2 * size_; ++i) tree_[i] = -1;
    for (size_t i = size_ - 1; i >= 1; --i) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  // The first bin with room >= need (there always is one: n bins for n documents).
  size_t Place(int64_t need) {
    size_t i = 1;
    while (i < size_) i = tree_[2 * i] >= need ? 2 * i : 2 * i + 1;
    const size_t bin = i - size_;
    tree_[i] -= need;
    for (i /= 2; i >= 1; i /= 2) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
    return bin;
  }

 private:
  size_t size_ = 1;
  std::vector<int64_t> tree_;
};

}  // namespace

Result<PackPlan> PlanPacking(std::span<const int64_t> lengths, int64_t seq_len, PackAlgorithm algorithm,
                             bool truncate) {
  if (seq_len < 1) return InvalidArgument("seq_len must be at least 1, not " + std::to_string(seq_len));
  std::vector<int64_t> len(lengths.begin(), lengths.end());
  std::vector<int64_t> order;
  order.reserve(len.size());
  PackPlan plan;
  plan.seq_len = seq_len;
  for (size_t d = 0; d < len.size(); ++d) {
    if (len[d] < 0) return InvalidArgument("document " + std::to_string(d) + " has a negative length");
    if (len[d] > seq_len) {
      if (!truncate) {
        return InvalidArgument("document " + std::to_string(d) + " holds " + std::to_string(len[d]) +
                               " tokens, more than a row of seq_len " + std::to_string(seq_len) +
                               ": pass truncate=True to keep its first seq_len tokens, or a larger seq_len");
      }
      len[d] = seq_len;
    }
    if (len[d] > 0) order.push_back(static_cast<int64_t>(d));
  }
  // Decreasing length; equal lengths in document order (stable).
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len[a] > len[b]; });
  std::vector<int64_t> bin_of(order.size());
  size_t bins = 0;
  if (algorithm == PackAlgorithm::kFirstFitDecreasing) {
    FirstFitTree tree(std::max<size_t>(1, order.size()), seq_len);
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t b = tree.Place(len[order[k]]);
      bin_of[k] = static_cast<int64_t>(b);
      bins = std::max(bins, b + 1);
    }
  } else {
    // Best fit: the open bin with the least room that still fits (ties: the
    // lower bin), else a new one.
    std::set<std::pair<int64_t, int64_t>> open;  // (room, bin)
    for (size_t k = 0; k < order.size(); ++k) {
      const int64_t need = len[order[k]];
      auto it = open.lower_bound({need, -1});
      int64_t b;
      int64_t room;
      if (it == open.end()) {
        b = static_cast<int64_t>(bins++);
        room = seq_len;
      } else {
        b = it->second;
        room = it->first;
        open.erase(it);
      }
      room -= need;
      if (room > 0) open.insert({room, b});
      bin_of[k] = b;
    }
  }
  // CSR by bin, documents in placement order.
  std::vector<int64_t> count(bins + 1, 0);
  for (size_t k = 0; k < order.size(); ++k) count[bin_of[k] + 1]++;
  std::partial_sum(count.begin(), count.end(), count.begin());
  plan.row_offsets = count;
  plan.documents.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    plan.documents[count[bin_of[k]]++] = order[k];
    plan.tokens += len[order[k]];
  }
  return plan;
}

Result<std::unique_ptr<PackedRows>> PackedRows::Create(std::unique_ptr<MegatronDataset> data, int64_t seq_len,
                                                       PackAlgorithm algorithm, std::vector<int64_t> prompt_lengths,
                                                       bool truncate, int64_t pad_id) {
  const std::vector<int32_t>& lengths = data->sequence_lengths();
  if (!prompt_lengths.empty() && prompt_lengths.size() != lengths.size()) {
    return InvalidArgument(data->prefix() + ": " + std::to_string(prompt_lengths.size()) +
                           " prompt lengths for " + std::to_string(lengths.size()) + " documents");
  }
  for (size_t d = 0; d < prompt_lengths.size(); ++d) {
    if (prompt_lengths[d] < 0 || prompt_lengths[d] > lengths[d]) {
      return InvalidArgument(data->prefix() + ": document " + std::to_string(d) + ": prompt length " +
                             std::to_string(prompt_lengths[d]) + " is outside its " + std::to_string(lengths[d]) +
                             " tokens");
    }
  }
  std::vector<int64_t> wide(lengths.begin(), lengths.end());
  Result<PackPlan> plan = PlanPacking(wide, seq_len, algorithm, truncate);
  if (!plan.ok()) return plan.status().WithContext(data->prefix());
  if (plan->rows() == 0) return InvalidArgument(data->prefix() + ": no tokens to pack (every document is empty)");
  auto rows = std::unique_ptr<PackedRows>(new PackedRows());
  rows->data_ = std::move(data);
  rows->plan_ = std::move(plan).value();
  rows->prompt_ = std::move(prompt_lengths);
  rows->pad_id_ = pad_id;
  return rows;
}

Result<PackedBatch> PackedRows::Fill(std::span<const int64_t> rows) const {
  const int64_t L = plan_.seq_len;
  const size_t n = rows.size() * static_cast<size_t>(L);
  PackedBatch b;
  b.tokens.assign(n, pad_id_);
  b.labels.assign(n, 0);
  b.loss_mask.assign(n, 0.0f);
  b.position_ids.assign(n, 0);
  b.segment_ids.assign(n, 0);
  b.cu_seqlens.push_back(0);
  b.row_document_offsets.push_back(0);
  const std::vector<int32_t>& lengths = data_->sequence_lengths();
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t row = rows[r];
    if (row < 0 || row >= plan_.rows()) {
      return InvalidArgument("row " + std::to_string(row) + " is outside the " + std::to_string(plan_.rows()) +
                             " packed rows");
    }
    const int64_t base = static_cast<int64_t>(r) * L;
    int64_t at = 0;
    int32_t segment = 0;
    for (int64_t k = plan_.row_offsets[row]; k < plan_.row_offsets[row + 1]; ++k) {
      const int64_t doc = plan_.documents[k];
      const int64_t len = std::min<int64_t>(lengths[doc], L);
      int64_t* tok = b.tokens.data() + base + at;
      STOKER_RETURN_IF_ERROR(data_->CopyTokens(static_cast<size_t>(doc), 0, len, tok).WithContext(
          data_->prefix() + ": document " + std::to_string(doc)));
      const int64_t prompt = prompt_.empty() ? 0 : prompt_[doc];
      ++segment;
      for (int64_t t = 0; t < len; ++t) {
        b.position_ids[base + at + t] = t;
        b.segment_ids[base + at + t] = segment;
      }
      // Label t is token t + 1 of the same document; trained when that token
      // is in the response (at or after the prompt's end).
      for (int64_t t = 0; t + 1 < len; ++t) {
        b.labels[base + at + t] = tok[t + 1];
        b.loss_mask[base + at + t] = t + 1 >= prompt ? 1.0f : 0.0f;
      }
      at += len;
      b.cu_seqlens.push_back(static_cast<int32_t>(base + at));
      b.max_seqlen = std::max<int32_t>(b.max_seqlen, static_cast<int32_t>(len));
      b.row_documents.push_back(doc);
    }
    if (at < L) {
      b.cu_seqlens.push_back(static_cast<int32_t>(base + L));
      b.max_seqlen = std::max<int32_t>(b.max_seqlen, static_cast<int32_t>(L - at));
    }
    b.row_document_offsets.push_back(static_cast<int64_t>(b.row_documents.size()));
  }
  return b;
}

}  // namespace stoker
