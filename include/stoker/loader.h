// stoker/loader.h — the C++ entry point: tar shards in, batches out.
//
//   LoaderOptions opt;
//   opt.sources = {"data/sa1b-{000000..000031}.tar"};
//   opt.fields = {ImageField("jpg", spec), NpzField("features.npz"), ScalarField("cls", DType::kI64)};
//   opt.batch_size = 24; opt.shuffle = true;
//   STOKER_ASSIGN_OR_RETURN(auto loader, Loader::Create(opt));
//   loader->SetEpoch(3);
//   while (true) {
//     STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Batch> batch, loader->Next());
//     if (!batch) break;                  // end of epoch
//     ... batch->arrays() ...              // views into one pooled buffer
//   }                                     // the buffer returns to its pool when the last
//                                         // shared_ptr to the Batch dies
//
// Thread-safety: a Loader is driven by one consumer thread (Next, SetEpoch,
// State, Restore); Batch objects may be released from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stoker/dtype.h"
#include "stoker/image_spec.h"
#include "stoker/key_rule.h"
#include "stoker/stats.h"
#include "stoker/status.h"
#include "stoker/storage_options.h"
#include "stoker/tuning.h"

namespace stoker {

enum class FieldKind : uint8_t {
  kImage,   // JPEG, PNG or WebP (by content) -> ImageSpec output, one array [B, ...]
  kNpy,     // one .npy array per sample -> [B, ...shape]
  kNpz,     // .npz -> one array per member name, each [B, ...shape]
  kScalar,  // a text member ("3\n") parsed as a number -> [B]
  kBytes,   // raw bytes -> [B, max_bytes] uint8 plus "<field>.len" [B] int64
  kText,    // like kBytes, checked to be UTF-8 (Python: a list of str per batch)
  kJson,    // like kBytes, checked to be one JSON value (Python: a list of parsed objects)
  kMsgpack, // like kBytes, checked to be one msgpack value (Python: a list of msgpack.unpackb objects)
  kPickle,  // like kBytes, unchecked (Python: a list of pickle.loads objects, only when allowed: it runs code)
};

struct FieldSpec {
  std::string field;               // the member field: "jpg", "features.npz", "cls"
  FieldKind kind = FieldKind::kBytes;
  ImageSpec image;                 // kImage
  DType dtype = DType::kI64;       // kScalar
  size_t max_bytes = 0;            // kBytes, kText, kJson, kMsgpack, kPickle
};

FieldSpec ImageField(std::string field, ImageSpec spec);
FieldSpec NpyField(std::string field);
FieldSpec NpzField(std::string field);
FieldSpec ScalarField(std::string field, DType dtype);
FieldSpec BytesField(std::string field, size_t max_bytes);
FieldSpec TextField(std::string field, size_t max_bytes);
FieldSpec JsonField(std::string field, size_t max_bytes);

// How the dataset is split among ranks so that every rank runs the same
// number of batches.
enum class PartitionPolicy : uint8_t {
  kDropRemainder,  // every rank gets floor(N / world) samples; the rest are not read this epoch
  kPadRepeat,      // every rank gets ceil(N / world); the shortfall repeats the first samples
  // Evaluation: every sample exactly once across the ranks, nothing dropped
  // or repeated. Rank r gets floor(N / world) samples, one more if r <
  // N % world; every rank runs ceil(ceil(N / world) / batch_size) batches, so
  // a rank's last batch may be short, or empty (Batch::size() 0, arrays of 0
  // rows) where it has fewer samples than the others. Needs drop_last false.
  kExact,
};

// Token windows from Megatron indexed datasets (prefix.bin + prefix.idx),
// sample for sample the order of megatron-core 0.16.1's GPTDataset (one path,
// no weights) or BlendedDataset (weights). With paths set, the loader yields
// one int64 array "tokens" [B, seq_len + 1] per batch (labels are its columns
// 1..seq_len) instead of fields; batch_size is megatron's micro batch size and
// ranks split each global batch (batch_size * world_size) as megatron's
// pretraining sampler does. seed, rank and world_size come from LoaderOptions.
struct TokenOptions {
  std::vector<std::string> paths;  // prefixes, without .bin/.idx
  std::vector<double> weights;     // empty: one path, a plain GPTDataset; else a blend
  int seq_len = 2048;
  int64_t num_samples = -1;        // <0: one epoch (blends need a number)
  std::string split = "100,0,0";   // megatron's split string
  int split_index = 0;             // 0 train, 1 valid, 2 test
  bool add_extra_token = true;     // add_extra_token_to_sequence
  std::string cache_dir;           // empty: <dir of each path>/cache/stoker_indices (a URL: under
                                   // STOKER_CACHE_DIR, else not cached)
  int64_t consumed_samples = 0;    // start here (megatron's consumed_samples)
};

// What a sample that cannot be read or decoded does to the stream.
enum class OnError : uint8_t {
  kRaise,  // Next() returns the error (naming shard, member, offset, cause); the batch is lost
  kSkip,   // the sample is dropped, logged and counted; its slot is refilled (see README "Long runs")
};

// Stream mode's shuffle buffer when shuffling and none is given (webdataset users' usual).
inline constexpr int kDefaultStreamShuffleBuffer = 1000;

// A mixture of sources (README, "Mixtures"; pipeline/mix_order.h): each
// entry of LoaderOptions::sources is one source, drawn by its weight.
enum class MixLaw {
  kSample,       // an epoch of samples_per_epoch draws; a source that runs out starts its next pass
  kProportion,   // an epoch is one pass of every source (weights are the sources' sizes)
  kStopAtFirst,  // each epoch starts a fresh pass of every source and ends before the first runs out
  // Mosaic Streaming's repeat/choose: each source draws a fixed count an
  // epoch (choose, or repeat x its samples); the epoch is their sum and a
  // source's passes run on across epochs, as under kSample.
  kCounts,
};
struct MixOptions {
  std::vector<std::string> names;  // one per entry of sources; empty: not a mixture
  std::vector<double> weights;     // one per source, >= 0, not all 0 (kProportion: unused; kCounts: repeat)
  // kCounts: a source's draws an epoch where >= 0 (Mosaic's choose), else
  // round(weights[s] x its samples) (repeat); one per source or empty (all repeat).
  std::vector<int64_t> choose;
  MixLaw law = MixLaw::kSample;
  int64_t samples_per_epoch = 0;   // kSample: the epoch's length; 0: the sources' total
  // Per source (each empty: none): fields it reads from members of other
  // names, (field, its member field), so sources that name a member
  // differently fill one schema; and its key rule (empty: the loader's).
  std::vector<std::vector<std::pair<std::string, std::string>>> members;
  std::vector<std::string> key_rules;  // "webdataset" | "underscore"; "": the loader's
  // kSample: each batch-size run of the epoch's positions from one source
  // (pipeline/mix_order.h); false: sources mixed within batches.
  bool one_source_per_batch = false;
  // Filled by Loader::Create: how many shards each source expanded to (the
  // shards are the sources' shards one source after another).
  std::vector<uint32_t> shards;
  // Filled by Loader::Create: each source's order unit, its shuffle_block and
  // shuffle_mix as a loader of that source alone resolves them (auto: a
  // Parquet source's row groups mixed, a remote source's blocks, a local
  // one's single samples), so sources of different kinds mix in one loader.
  // Empty: the loader's shuffle_block and shuffle_mix for every source.
  std::vector<int> shuffle_blocks;
  std::vector<int> shuffle_mixes;
  // Law kSample after a restore with other weights (the loader sets them;
  // pipeline/mix_order.h): the weights hold from epoch base_epoch on, each
  // source's stream going on from base_draws (its draws before that epoch;
  // empty: none).
  uint64_t base_epoch = 0;
  std::vector<uint64_t> base_draws;
};
// The user's per-sample function (src/pipeline/sample_map.h).
class SampleMap;

struct LoaderOptions {
  TokenOptions tokens;             // paths set: a token loader; sources/fields unused
  // Shards: paths, brace ranges "a-{000..031}.tar", globs "dir/*.tar", or a
  // text file (".txt") listing one shard per line.
  std::vector<std::string> sources;
  std::vector<FieldSpec> fields;
  KeyRule key_rule = KeyRule::kWebDataset;
  MixOptions mix;                  // names set: the sources are a mixture, not one dataset

  int batch_size = 32;
  bool drop_last = true;           // false: the last batch of a rank may be short (kExact needs false)
  bool shuffle = false;
  uint64_t seed = 0;
  // 0 with shuffle: one global permutation of all samples, or of blocks of
  // them (shuffle_block; random access by index). >0: streaming order: shards shuffled, then samples passed through a
  // shuffle buffer of this many samples, so reads stay sequential.
  int shuffle_buffer = 0;
  // With shuffle and shuffle_buffer 0, the unit the global permutation moves
  // (pipeline/planner.h): 1: single samples; N > 1: blocks of N to 2N-1
  // consecutive samples of one shard, cut at a random offset per shard and
  // epoch, so a batch's reads are a few coalesced ranges; -1: auto (1 for
  // local files, kRemoteShuffleBlock for http/https/s3 shards).
  int shuffle_block = -1;
  // With shuffle and shuffle_buffer 0, how far the permutation reaches
  // (pipeline/planner.h): K > 0: the shards are permuted, the permuted list
  // is cut into windows of K consecutive shards, and each window's samples
  // (or blocks, shuffle_block) are permuted among themselves; windows follow
  // one another, so a rank reads about K shards at a time and the order costs
  // O(shards) memory. 0: the whole dataset is one window (a global
  // permutation). -1: auto: 0 while every shard's index table fits in
  // index_cache_bytes, else as many shards as half of it holds (two windows'
  // tables at a window's edge), at least kMinShuffleWindow; unresolved means 0.
  int shuffle_window = -1;
  // With shuffle, shuffle_buffer 0 and blocks (shuffle_block > 1), the mix
  // inside blocks (pipeline/planner.h): M > 0: the samples of each run of M
  // consecutive blocks of the order are permuted among themselves, and blocks
  // are cut at multiples of shuffle_block (for Parquet, its row groups) rather
  // than at a moving phase; 0: a block's samples keep their member order.
  // -1: auto: 0 for tar shards, whose blocks are ranged reads; for Parquet
  // files kParquetMixBlocks (planner.h) row-group blocks, fewer where
  // memory_budget cannot hold them decoded at once.
  int shuffle_mix = -1;

  // Stream mode (README, "Stream mode"), for tar shards with no index and no
  // manifest: each rank reads its shards front to back once, as webdataset
  // does, and nothing is counted before the first batch. Shards are permuted
  // per pass (shuffle), samples pass a shuffle buffer of shuffle_buffer
  // samples (0: kDefaultStreamShuffleBuffer; no shuffle: stream order).
  // Needs samples_per_epoch (webdataset's with_epoch): every rank delivers
  // samples_per_epoch / (world_size * batch_size) batches per epoch, cut from
  // its one endless stream.
  bool stream = false;
  int64_t samples_per_epoch = 0;

  int rank = 0;
  int world_size = 1;
  PartitionPolicy partition = PartitionPolicy::kDropRemainder;

  int decode_threads = 0;          // 0: one per hardware thread
  // Concurrent reads, apart from decode threads. -1: auto (4 for local files;
  // for remote shards the reads of 8 batches: 8 in stream order, 40 for the
  // block shuffle of batch 64, at most 64; lowered to fit memory_budget).
  int io_depth = -1;
  // Consecutive samples of one batch that lie next to each other in one shard
  // are fetched by one read of up to this many bytes (one ranged GET instead
  // of one round trip per sample). -1: auto (8 MiB for remote shards, off for
  // local files, whose reads cost no round trip); 0: off.
  int64_t coalesce_bytes = -1;
  // Batches whose reads start before a batch buffer is free for them (their
  // bytes wait, bounded), so reads in flight are not capped by
  // prefetch_batches. -1: auto (for remote shards, enough batches for
  // io_depth reads; 0 for local).
  int read_ahead_batches = -1;
  uint64_t max_read_bytes_per_s = 0;  // 0: unlimited; else readers share this bandwidth
  int prefetch_batches = -1;       // whole batches decoded ahead of the consumer; -1: auto (2)
  // The online controller (src/pipeline/autotune.h) moves every knob above
  // left on auto (io_depth, read_ahead_batches, decode_threads, prefetch_batches)
  // while the loader runs, from what the stages measure; a knob given a value
  // stays fixed. false: the auto values stay as resolved at Create.
  bool autotune = true;
  int timeout_ms = 0;              // >0: Next() fails (DeadlineExceeded) after waiting this long
  // Remote storage: endpoint, profile, region, retry deadline, cache. Unset:
  // the environment's when the loader is made (stoker/storage_options.h).
  std::optional<StorageOptions> storage;
  bool include_keys = true;        // Batch::keys() and urls() filled
  // Parquet sources: the column whose value is each row's key (a string or
  // integer column); empty: "file:row" (pipeline/sample_keys.h).
  std::string key_column;

  bool record_stats = true;        // stage counters for Stats() (relaxed atomics; cheap)
  size_t trace_spans = 0;          // >0: keep the last N stage spans for TraceJson()

  // Long runs. on_error=kSkip refills a bad sample's slot from the rank's own
  // partition, read from its start (a repeat, counted as refilled), so batches
  // stay full and batch counts equal. The budget turns a systemic fault into an
  // error: more than max_skips skipped samples (0: no count limit), or a skipped
  // fraction above max_skip_fraction (0: none) once skip_probation samples were seen.
  OnError on_error = OnError::kRaise;
  int64_t max_skips = 0;
  double max_skip_fraction = 0;
  int64_t skip_probation = 1000;
  size_t max_open_files = 0;       // shards kept open at once; 0: from RLIMIT_NOFILE (a quarter, in [4, 1024])
  // >0: bytes for batch buffers, read buffers and decode scratch together;
  // Create refuses, naming what it would need, a configuration above it.
  uint64_t memory_budget = 0;
  // >0: bytes of shard index tables (each sample's offsets, ~50 bytes a
  // sample) kept in memory when they do not all fit; 0: 16 MiB, or an eighth
  // of memory_budget (pipeline/shard_index_cache.h).
  uint64_t index_cache_bytes = 0;

  // Where batches are delivered. "cpu": pooled host memory. "cuda" or
  // "cuda:N": device memory; each batch's copy is issued on a stream of the
  // loader's own as soon as the batch is assembled, from page-locked pool
  // buffers, so it overlaps the current step (pipeline/device_stage.h). The
  // CUDA runtime is found at run time (device/cuda_runtime.h): Create fails,
  // saying what it looked for, where there is none. "cpu-late" is for TESTS
  // ONLY: device copies on a CPU engine that completes them late_copy_ms
  // late and checks their bytes were not overwritten meanwhile
  // (device/copy_engine.h); batches stay host arrays.
  std::string device = "cpu";
  // Page-lock the batch buffers (as torch's pin_memory) where a CUDA runtime
  // with a device is present; no effect where none is. device="cuda" implies it.
  bool pin_memory = false;
  int late_copy_ms = 20;  // device="cpu-late" only
  // device="cpu-late" only: its stand-in GPU decoder (device/gpu_decoder.h)
  // sleeps this long per image, to be slower than the CPU decoders.
  int gpu_standin_delay_us = 0;
  // device="cpu-late" only (tests of the watchdog, device/hardware_batcher.h):
  // the stand-in's hardware batches after this many never return (-1: all
  // return), and the watchdog's least bound in ms (0: 2 s, as for nvJPEG).
  int gpu_standin_stall_after = -1;
  int gpu_standin_watchdog_ms = 0;

  // One of the workers that share this rank's batches (Ray workers and the
  // trainer beside them, python/stoker/ray_workers.py): in each cycle of
  // batch_stride batches the loader delivers only the rank's batches whose
  // place b % batch_stride is in [batch_offset, batch_offset + batch_share),
  // in order, and reads nothing else; they equal the rank's batches byte for
  // byte (pipeline/batch_stride.h). 1, 0 and 1: every batch. batch_share 0:
  // none; such a loader finishes the batches the others made (Receive).
  int batch_stride = 1;
  int batch_offset = 0;
  int batch_share = 1;
  // on_error=kSkip in one of those workers: a bad sample's slot is left as it
  // is and named (Batch::failures). The refills come from the rank's whole
  // partition in batch order (pipeline/skip_refill.h), so the one loader that
  // receives every batch makes them (Receive). Required for on_error=kSkip
  // when 0 < batch_share < batch_stride: a worker's own refills would not be
  // the rank's.
  bool leave_failed_slots = false;
  // The user's own function, run on each sample on the decode threads right
  // after its fields are decoded into its slot (src/pipeline/sample_map.h):
  // its arrays join the batch, its failures are the sample's. Null: none.
  std::shared_ptr<SampleMap> sample_map;
};

struct ArrayView {
  std::string name;                // "jpg", "features.npz/embeddings", "cls", "__index__"
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;      // leading dimension is the batch
  uint8_t* data = nullptr;         // inside the batch's pooled buffer
  size_t nbytes = 0;
  int device = -1;                 // CUDA ordinal data lives on; -1: host memory
};

// A slot whose sample failed, left for the rank's refills (on_error=kSkip
// with leave_failed_slots).
struct SlotFailure {
  int slot = 0;
  std::string cause;  // the error: shard, member, byte offset, cause
};

class Batch {
 public:
  virtual ~Batch() = default;
  virtual int64_t index() const = 0;    // batch number within the epoch, from 0
  virtual int size() const = 0;         // samples in it
  virtual const std::vector<ArrayView>& arrays() const = 0;
  // Each sample's key and where it came from, as webdataset names them
  // (pipeline/sample_keys.h): tar "dir/000000" with url the shard as given;
  // image folder "cat/000001" with url the file; Parquet the key column's
  // value or "file:row" with url the file.
  virtual const std::vector<std::string>& keys() const = 0;
  virtual const std::vector<std::string>& urls() const = 0;
  // The consumer needs the batch now on `stream` (a cudaStream_t as an
  // integer, 0 the default stream): with device="cuda" the stream waits for
  // the batch's copy, the host does not; later copies into this batch's
  // device buffer wait for the work `stream` queued until the batch is
  // released. Host batches: nothing to do.
  virtual Status NeededOn(uintptr_t stream) { return Status::Ok(); }
  // The slots left unfilled for Loader::Receive (see SlotFailure), lowest first; empty otherwise.
  virtual const std::vector<SlotFailure>& failures() const {
    static const std::vector<SlotFailure> none;
    return none;
  }
};

// One of the rank's batches made by another loader of its shares
// (batch_stride), as received: its arrays in the layout's order, each
// sample's key and url, and the slots it left for the refills.
struct ReceivedBatch {
  int64_t index = 0;  // the rank's batch number in the current epoch
  std::vector<ArrayView> arrays;
  std::vector<std::string> keys, urls;
  std::vector<SlotFailure> failures;
};

// What the planner decided for this rank and epoch, so no drop or pad is silent.
struct PlanInfo {
  int64_t dataset_samples = 0;     // all samples in all shards
  int64_t rank_samples = 0;        // delivered to this rank per epoch (pads included; kExact: ranks differ by <= 1)
  int64_t dropped_samples = 0;     // samples of the dataset no rank reads this epoch
  int64_t padded_samples = 0;      // repeats added to this rank
  int64_t batches = 0;             // per rank per epoch, equal on every rank
  int64_t num_shards = 0;
};

// One skipped sample: where it was in the stream and why.
struct SkipRecord {
  uint64_t epoch = 0;
  int64_t batch = 0;     // the batch whose slot it would have filled
  int slot = 0;
  uint64_t sample = 0;   // index within the dataset
  std::string key;       // "shard.tar:key": the shard and its key, unique in the dataset
  std::string cause;     // the error: shard, member, byte offset, cause
};

struct SkipCounts {
  int64_t skipped = 0;   // distinct bad samples met, over the loader's life
  int64_t refilled = 0;  // slots filled from the reserve (repeats of good samples)
  int64_t seen = 0;      // samples tried: delivered plus skipped
};

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Create(LoaderOptions options);
  virtual ~Loader() = default;     // cancels and joins every thread; returns promptly

  // Starts (or restarts) the epoch's plan from its first batch. A loader over
  // local shards begins epoch 0 at Create (the first batch at once) and, as
  // each epoch ends, the next one (no stall at its start), within the same
  // prefetch_batches buffers: SetEpoch keeps that work when it asks for that
  // epoch, and drops it for any other. Destroy or Stop() ends it.
  virtual Status SetEpoch(uint64_t epoch) = 0;
  // The next batch in plan order; nullptr at the end of the epoch. Blocks
  // while the batch is being made. Errors name shard, member, offset, cause.
  virtual Result<std::shared_ptr<Batch>> Next() = 0;
  // As Next, waiting at most wait_ms: if the batch is not ready by then,
  // *waiting is set and nullptr returned, and the position is kept. Bindings
  // poll with it so that an interrupt (Ctrl-C) is seen while a batch is made.
  virtual Result<std::shared_ptr<Batch>> NextWithin(int wait_ms, bool* waiting) = 0;
  // Stops every thread (e.g. the caller broke out of its loop) and keeps the
  // position: a later Next() resumes with the next undelivered batch.
  virtual void Stop() = 0;

  virtual const PlanInfo& plan() const = 0;
  // Every stage's counters and gauges now (zeros when record_stats is off).
  virtual RecorderSnapshot Stats() const = 0;
  // Stage spans as Chrome trace JSON (empty list unless trace_spans > 0).
  virtual std::string TraceJson() const = 0;
  virtual const LoaderOptions& options() const = 0;

  // Resumption: a JSON string naming the epoch and the batches delivered.
  // Restore on a loader built with the same options continues with exactly the
  // batches not yet delivered, in the same order.
  virtual std::string State() const = 0;
  virtual Status Restore(const std::string& state) = 0;

  // on_error=kSkip: totals, and the records of skips not yet taken (each skip
  // appears once; the Python package logs them).
  virtual SkipCounts Skips() const = 0;
  virtual std::vector<SkipRecord> TakeSkipLog() = 0;
  // A batch of this rank made by another of its shares, finished here as
  // this loader finishes its own: copied into a buffer of its pool
  // (page-locked with pin_memory), its failed slots refilled from the
  // rank's partition under the budget (on_error=kSkip; every batch of the
  // epoch must come through here once, in order, for the refills and the
  // counts to be the local loader's), and copied to the device. The arrays
  // must be the layout's, by name and size.
  virtual Result<std::shared_ptr<Batch>> Receive(ReceivedBatch batch) = 0;
  // Shards whose descriptors are cached open now (at most max_open_files).
  virtual size_t OpenShardFiles() const = 0;
  // A mixture (LoaderOptions::mix): the source each of `urls` (a batch's
  // urls()) came from, by name; empty for a loader of one dataset.
  virtual std::vector<std::string> SourcesOf(const std::vector<std::string>& urls) const {
    (void)urls;
    return {};
  }

  // The knobs in effect now (the controller moves those left on auto).
  virtual LoaderSettings Settings() const = 0;
  // Every change the controller made, oldest first; TakeTuneLog returns
  // only those not taken before (each change appears once; Python logs them).
  virtual std::vector<TuneChange> TuneLog() const = 0;
  virtual std::vector<TuneChange> TakeTuneLog() = 0;
};

// Expands sources (brace ranges, globs, list files) into existing shard paths.
// s3:// globs are listed with `storage` (default: the environment's).
Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& sources);
Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& sources, const StorageOptions& storage);

}  // namespace stoker
