// pipeline/tune_config.h — where each knob starts and how far the online
// controller (autotune.h) may move it, from the loader's options.
//
// Starts are today's auto values (read_runs.h, memory_budget.h), so a loader
// begins exactly as it did before tuning existed and the controller moves
// only on evidence. A knob the user passed (io_depth >= 0, decode_threads >
// 0, read_ahead_batches >= 0, prefetch_batches > 0) is fixed; autotune=false
// fixes all of them. Ceilings: decode threads at the core count, reads in
// flight at kMaxRemoteIoDepth remote and kMaxLocalIoDepth local, prefetch at
// kMaxPrefetch batches and kMaxPrefetchBytes of batch buffers; then, under a
// memory_budget, lowered (reads first, then prefetch) until the estimate of
// every ceiling at once fits, so no setting the controller may pick can pass
// the budget.
// Thread-safety: pure functions on values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/dataset_manifest.h"
#include "pipeline/autotune.h"
#include "pipeline/batch_layout.h"
#include "stoker/loader.h"
#include "stoker/tuning.h"

namespace stoker {

inline constexpr int kDefaultPrefetch = 2;
// Token batches are small (batch 8 of seq 2048: 131 KB) and quick to fill, so the
// handoff between threads, not the work, sets the pace: more of them in
// flight hide it (bench/autotune.py scenario f: 8 beat 4 at every io_depth).
inline constexpr int kDefaultTokenPrefetch = 8;
inline constexpr int kMaxLocalIoDepth = 16;
inline constexpr int kMaxPrefetch = 8;
inline constexpr uint64_t kMaxPrefetchBytes = 512ull << 20;
// With image fields decoded on the GPU a batch is ready only after its
// slowest CPU-decoded image and then its turn on the GPU decoder, so more
// batches must be in flight to keep both busy. Measured on an H200 with 16
// cores (bench/gpu_decode.py's loaders): S (batch 8 of 2250x1500 JPEGs) fed
// 600 images/s at the tuner's 5 batches and 2,037 at 16; V (batch 256) fed
// 22,830 at 3 and 30,879 at 8. So auto prefetch starts at 8 batches, or
// 128 images where batches are small, at most 16 batches and 1 GiB of
// batch buffers.
inline constexpr int kGpuDecodePrefetch = 8;
inline constexpr int kGpuDecodePrefetchImages = 128;
inline constexpr int kMaxGpuDecodePrefetch = 16;
inline constexpr uint64_t kMaxGpuDecodePrefetchBytes = 1ull << 30;
// That auto prefetch for `options` (io_depth resolved), lowered (not below
// kDefaultPrefetch) while `need` (the mode's estimate, memory_budget.h, of
// the options with that prefetch) exceeds options.memory_budget.
int GpuDecodePrefetch(const LoaderOptions& options, const BatchLayout& layout,
                      const std::function<uint64_t(const LoaderOptions&)>& need);

// `user`: the options as given (auto knobs still -1 / 0); `resolved`: with
// io_depth, shuffle_block and prefetch_batches resolved. `cores`: hardware
// threads. `row_group_bytes`: as EstimateMemory's.
TuneConfig MakeTuneConfig(const LoaderOptions& user, const LoaderOptions& resolved, const BatchLayout& layout,
                          const std::vector<ShardSummary>& shards, bool remote, bool tokens, int cores,
                          uint64_t row_group_bytes = 0);

// A stream's (stream_run.h): one reading thread, so reads in flight and
// read-ahead are not knobs (1 and 0); decode threads and prefetch start and
// range as the indexed mode's, their ceilings lowered until the stream's
// estimate (EstimateStreamMemory, at `sample_bytes` and `window_bytes`) of
// both at once fits the memory budget.
TuneConfig MakeStreamTuneConfig(const LoaderOptions& user, const LoaderOptions& resolved, const BatchLayout& layout,
                                uint64_t sample_bytes, uint64_t window_bytes, int cores);

// `options` with the four knobs set to `s` (for memory estimates).
LoaderOptions WithSettings(LoaderOptions options, const TuneSettings& s);

// The settings as the public struct.
LoaderSettings ToLoaderSettings(const TuneConfig& config, const TuneSettings& now, bool autotune);

}  // namespace stoker
