// pipeline/read_runs.cc — see read_runs.h.
#include "pipeline/read_runs.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "io/reader.h"

namespace stoker {

uint64_t CoalesceLimit(const LoaderOptions& options, const std::string& shard_path) {
  if (options.coalesce_bytes >= 0) return static_cast<uint64_t>(options.coalesce_bytes);
  return IsRemoteUrl(shard_path) ? kRemoteCoalesceBytes : 0;
}

int ReadsPerBatch(const LoaderOptions& options) {
  const int batch = std::max(1, options.batch_size);
  if (options.coalesce_bytes == 0) return batch;
  if (!options.shuffle || options.shuffle_buffer > 0) return 1;
  if (options.shuffle_block <= 1) return batch;
  return std::min(batch, (batch + options.shuffle_block - 1) / options.shuffle_block + 1);
}

int ReadAheadBatches(const LoaderOptions& options, const std::string& shard_path, uint64_t batch_bytes) {
  if (options.read_ahead_batches >= 0) return options.read_ahead_batches;
  if (!IsRemoteUrl(shard_path)) return 0;
  const uint64_t fit = batch_bytes > 0 ? kReadAheadBytes / batch_bytes : kReadAheadBytes;
  const int reads = ReadsPerBatch(options);
  const int wanted = (std::max(1, options.io_depth) + reads - 1) / reads;
  return static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(wanted, fit)));
}

int RemoteIoDepth(const LoaderOptions& options) {
  return std::clamp(kRemoteBatchesInFlight * ReadsPerBatch(options), kRemoteBatchesInFlight, kMaxRemoteIoDepth);
}

int RunLength(const EpochPlan& plan, ShardIndexCache& indexes, int64_t first, int n, uint64_t limit) {
  if (plan.strided) return 1;
  return RunLengthOf([&](int k) { return plan.At(first + k); }, indexes, n, limit);
}

int RunLengthOf(const std::function<SampleRef(int)>& ref_at, ShardIndexCache& indexes, int n, uint64_t limit) {
  if (n <= 1 || limit == 0) return 1;
  const SampleRef head = ref_at(0);
  Result<std::shared_ptr<const ShardIndex>> index = indexes.Get(head.shard);
  if (!index.ok()) return 1;
  const SampleTable& samples = (*index)->samples;
  const uint64_t begin = samples[head.sample].begin;
  uint64_t end = samples[head.sample].end;
  int count = 1;
  while (count < n) {
    const SampleRef next = ref_at(count);
    if (next.shard != head.shard) break;
    const SampleView e = samples[next.sample];
    if (e.begin < end || e.begin - end > kMaxCoalesceGap || e.end - begin > limit) break;
    end = e.end;
    ++count;
  }
  return count;
}

std::vector<std::vector<int>> ScatteredRuns(std::span<const SampleRef> refs, ShardIndexCache& indexes,
                                            const std::function<uint64_t(uint32_t shard)>& limit_of) {
  std::vector<int> order(refs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::pair(refs[a].shard, refs[a].sample) < std::pair(refs[b].shard, refs[b].sample);
  });
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < order.size();) {
    const uint32_t shard = refs[order[i]].shard;
    size_t end = i;
    while (end < order.size() && refs[order[end]].shard == shard) ++end;
    const uint64_t limit = limit_of(shard);
    const bool held = indexes.Held(shard);
    for (size_t at = i; at < end;) {
      const int left = static_cast<int>(end - at);
      const int n = limit == 0 ? 1
                    : !held    ? left
                               : RunLengthOf([&](int k) { return refs[order[at + k]]; }, indexes, left, limit);
      groups.emplace_back(order.begin() + at, order.begin() + at + n);
      at += n;
    }
    i = end;
  }
  return groups;
}

}  // namespace stoker
