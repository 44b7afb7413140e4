// pipeline/memory_budget.cc — the memory estimate and budget check; see memory_budget.h.
#include "pipeline/memory_budget.h"

#include <algorithm>

#include "core/cpu_share.h"
#include "pipeline/read_runs.h"

namespace stoker {

namespace {

std::string MiB(uint64_t bytes) {
  const uint64_t tenths = (bytes * 10 + (1 << 19)) >> 20;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
}

// Per decoder: a JPEG field's decoded plane (12 bytes per compressed byte)
// and an NPZ field's inflated member, for samples of `sample_bytes`.
uint64_t DecodeScratch(const LoaderOptions& o, uint64_t decoders, uint64_t sample_bytes) {
  bool jpeg = false, npz = false;
  for (const FieldSpec& f : o.fields) {
    jpeg |= f.kind == FieldKind::kImage;
    npz |= f.kind == FieldKind::kNpz;
  }
  return decoders * ((jpeg ? 12 * sample_bytes : 0) + (npz ? sample_bytes : 0));
}

constexpr uint64_t kOverhead = uint64_t{16} << 20;

}  // namespace

std::string MemoryNeed::ToString() const {
  return MiB(total()) + " (" + MiB(batch_buffers) + " batch buffers, " + MiB(read_buffers) + " read buffers, " +
         MiB(decode_scratch) + " decode scratch, " + MiB(overhead) + " overhead" +
         (row_groups ? ", " + MiB(row_groups) + " decoded Parquet row groups" : "") + ")";
}

MemoryNeed EstimateMemory(const LoaderOptions& o, const BatchLayout& layout, const std::vector<ShardSummary>& shards,
                          uint64_t row_group_bytes) {
  uint64_t max_sample = 0;
  for (const ShardSummary& s : shards) max_sample = std::max(max_sample, s.max_sample_bytes);
  const uint64_t readers = static_cast<uint64_t>(std::max(1, o.io_depth));
  // Auto decode threads start at this process's CPU share (core/cpu_share.h).
  const uint64_t decoders = o.decode_threads > 0 ? static_cast<uint64_t>(o.decode_threads)
                                                 : static_cast<uint64_t>(CurrentCpuShare().cores);
  const bool parquet = row_group_bytes > 0;
  const uint64_t queue = DecodeQueueCapacity(o, parquet);
  MemoryNeed need;
  need.batch_buffers = (static_cast<uint64_t>(std::max(1, o.prefetch_batches)) + 1) * layout.buffer_bytes;
  // Each reader, queued task and decoder holds at most one read buffer; a
  // buffer holds one sample, or a run of them (pipeline/read_runs.h) no larger
  // than the coalesce limit. Runs belong to batches in progress, so all of
  // them together never exceed those batches' samples.
  uint64_t limit = 0, ahead = 0;
  for (const ShardSummary& shard : shards) {
    limit = std::max(limit, CoalesceLimit(o, shard.path));
    ahead = std::max<uint64_t>(
        ahead, static_cast<uint64_t>(ReadAheadBatches(o, shard.path,
                                                      static_cast<uint64_t>(std::max(1, o.batch_size)) * max_sample)));
  }
  need.read_buffers = (readers + queue + decoders + 1) * max_sample;
  if (limit > max_sample) {
    const uint64_t in_batches = (static_cast<uint64_t>(std::max(1, o.prefetch_batches)) + 2) *
                                static_cast<uint64_t>(std::max(1, o.batch_size)) * max_sample;
    need.read_buffers = std::max(need.read_buffers, std::min((readers + queue + decoders + 1) * limit, in_batches));
  }
  // Batches read ahead of their buffers hold their samples' bytes.
  need.read_buffers += ahead * static_cast<uint64_t>(std::max(1, o.batch_size)) * max_sample;
  need.decode_scratch = DecodeScratch(o, decoders, max_sample);
  need.overhead = kOverhead;
  // Parquet: the decoded row groups kept (the mix's run among them), and one
  // more being decoded per reader; each at most the largest row group.
  need.row_groups = (ParquetGroupsKept(o.io_depth, o.shuffle_mix) + readers) * row_group_bytes;
  return need;
}

MemoryNeed EstimateStreamMemory(const LoaderOptions& o, const BatchLayout& layout, uint64_t sample_bytes,
                                uint64_t window_bytes) {
  const uint64_t decoders = static_cast<uint64_t>(std::max(1, o.decode_threads));
  // A mixture's sources each hold a shuffle buffer and read a shard with the next one opening (stream_source.h).
  const uint64_t sources = std::max<uint64_t>(1, o.mix.names.size());
  const uint64_t held = sources * static_cast<uint64_t>(std::max(0, o.shuffle_buffer)) +
                        StreamDecodeQueueCapacity(o.batch_size, o.decode_threads) + decoders;
  MemoryNeed need;
  need.batch_buffers = (static_cast<uint64_t>(std::max(1, o.prefetch_batches)) + 1) * layout.buffer_bytes;
  need.read_buffers = held * sample_bytes + 3 * sources * window_bytes;
  need.decode_scratch = DecodeScratch(o, decoders, sample_bytes);
  need.overhead = kOverhead;
  return need;
}

int AutoIoDepth(const LoaderOptions& options, const BatchLayout& layout, const std::vector<ShardSummary>& shards,
                bool remote, uint64_t row_group_bytes) {
  if (options.io_depth >= 0) return options.io_depth;
  LoaderOptions o = options;
  o.io_depth = remote ? RemoteIoDepth(o) : kLocalIoDepth;
  while (o.memory_budget > 0 && o.io_depth > kLocalIoDepth &&
         EstimateMemory(o, layout, shards, row_group_bytes).total() > o.memory_budget) {
    o.io_depth = std::max(kLocalIoDepth, o.io_depth / 2);
  }
  return o.io_depth;
}

Status CheckMemoryBudget(const LoaderOptions& o, const MemoryNeed& need, const std::string& basis) {
  if (o.memory_budget == 0 || need.total() <= o.memory_budget) return Status::Ok();
  return InvalidArgument("memory_budget=" + std::to_string(o.memory_budget) + " (" + MiB(o.memory_budget) +
                         ") cannot fit this configuration: it needs " + std::to_string(need.total()) + " bytes, " +
                         need.ToString() + (basis.empty() ? "" : " (" + basis + ")") +
                         " with prefetch=" + std::to_string(o.prefetch_batches) +
                         ", io_depth=" + std::to_string(o.io_depth) + ", decode_threads=" +
                         std::to_string(o.decode_threads) + "; lower those or raise the budget");
}

}  // namespace stoker
