#include "pipeline/batch_stride.h"

#include <algorithm>
#include <string>

namespace stoker {

Status CheckBatchShare(int stride, int offset, int share) {
  if (stride < 1) return InvalidArgument("batch_stride must be at least 1, not " + std::to_string(stride));
  if (share < 0) return InvalidArgument("batch_share must be at least 0, not " + std::to_string(share));
  if (offset < 0 || offset + share > stride) {
    return InvalidArgument("batch_offset " + std::to_string(offset) + " and batch_share " + std::to_string(share) +
                           " must lie in the cycle of batch_stride " + std::to_string(stride) + " batches");
  }
  return Status::Ok();
}

Result<EpochPlan> StrideBatches(EpochPlan plan, int batch_size, int stride, int offset, int share) {
  STOKER_RETURN_IF_ERROR(CheckBatchShare(stride, offset, share));
  if (share == stride) return plan;
  if (plan.strided) return InvalidArgument("batch_stride > 1 is for shard loaders, not token runs");
  if (share == 0) {  // none of the batches: a loader that finishes the others' (Loader::Receive)
    plan.spans.clear();
    plan.span_start.clear();
    plan.info.batches = 0;
    plan.info.rank_samples = 0;
    return plan;
  }
  if (batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  const int64_t bs = batch_size, total = plan.info.rank_samples;
  std::vector<OrderSpan> spans;
  int64_t samples = 0, batches = 0;
  for (int64_t b = offset; b < plan.info.batches; b += (b % stride == offset + share - 1) ? stride - share + 1 : 1) {
    const int64_t rows = std::clamp<int64_t>(total - b * bs, 0, bs);
    // Rows counted from batch k * bs must be this batch's: only the last may be short.
    if (rows < bs && b + 1 < plan.info.batches) {
      return Internal("batch " + std::to_string(b) + " of " + std::to_string(plan.info.batches) + " holds " +
                      std::to_string(rows) + " of " + std::to_string(bs) + " samples but is not the last");
    }
    ++batches;
    samples += rows;
    if (rows == 0) continue;
    for (const OrderSpan& s : SliceSpans(plan.spans, static_cast<uint64_t>(total), static_cast<uint64_t>(b * bs),
                                         static_cast<uint64_t>(rows))) {
      if (!spans.empty() && spans.back().first + spans.back().count == s.first) {
        spans.back().count += s.count;
      } else {
        spans.push_back(s);
      }
    }
  }
  plan.spans = std::move(spans);
  plan.span_start.clear();
  uint64_t at = 0;
  for (const OrderSpan& s : plan.spans) {
    plan.span_start.push_back(at);
    at += s.count;
  }
  plan.info.batches = batches;
  plan.info.rank_samples = samples;
  return plan;
}

}  // namespace stoker
