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
#include <string>
#include <vector>

#include "stoker/dtype.h"
#include "stoker/image_spec.h"
#include "stoker/key_rule.h"
#include "stoker/stats.h"
#include "stoker/status.h"

namespace stoker {

enum class FieldKind : uint8_t {
  kImage,   // JPEG, PNG or WebP (by content) -> ImageSpec output, one array [B, ...]
  kNpy,     // one .npy array per sample -> [B, ...shape]
  kNpz,     // .npz -> one array per member name, each [B, ...shape]
  kScalar,  // a text member ("3\n") parsed as a number -> [B]
  kBytes,   // raw bytes -> [B, max_bytes] uint8 plus "<field>.len" [B] int64
  kText,    // like kBytes, checked to be UTF-8 (Python: a list of str per batch)
  kJson,    // like kBytes, checked to be one JSON value (Python: a list of parsed objects)
};

struct FieldSpec {
  std::string field;               // the member field: "jpg", "features.npz", "cls"
  FieldKind kind = FieldKind::kBytes;
  ImageSpec image;                 // kImage
  DType dtype = DType::kI64;       // kScalar
  size_t max_bytes = 0;            // kBytes, kText, kJson
};

FieldSpec ImageField(std::string field, ImageSpec spec);
FieldSpec NpyField(std::string field);
FieldSpec NpzField(std::string field);
FieldSpec ScalarField(std::string field, DType dtype);
FieldSpec BytesField(std::string field, size_t max_bytes);
FieldSpec TextField(std::string field, size_t max_bytes);
FieldSpec JsonField(std::string field, size_t max_bytes);

// How each rank's share of the dataset is made equal in size.
enum class PartitionPolicy : uint8_t {
  kDropRemainder,  // every rank gets floor(N / world) samples; the rest are not read this epoch
  kPadRepeat,      // every rank gets ceil(N / world); the shortfall repeats the first samples
};

struct LoaderOptions {
  // Shards: paths, brace ranges "a-{000..031}.tar", globs "dir/*.tar", or a
  // text file (".txt") listing one shard per line.
  std::vector<std::string> sources;
  std::vector<FieldSpec> fields;
  KeyRule key_rule = KeyRule::kWebDataset;

  int batch_size = 32;
  bool drop_last = true;           // false: the last batch of a rank may be short
  bool shuffle = false;
  uint64_t seed = 0;
  // 0 with shuffle: one global permutation of all samples (random access by
  // index). >0: streaming order: shards shuffled, then samples passed through a
  // shuffle buffer of this many samples, so reads stay sequential.
  int shuffle_buffer = 0;

  int rank = 0;
  int world_size = 1;
  PartitionPolicy partition = PartitionPolicy::kDropRemainder;

  int decode_threads = 0;          // 0: one per hardware thread
  int io_depth = 4;                // concurrent reads, apart from decode threads
  uint64_t max_read_bytes_per_s = 0;  // 0: unlimited; else readers share this bandwidth
  int prefetch_batches = 2;        // whole batches decoded ahead of the consumer
  int timeout_ms = 0;              // >0: Next() fails (DeadlineExceeded) after waiting this long
  bool include_keys = true;        // Batch::keys() filled

  bool record_stats = true;        // stage counters for Stats() (relaxed atomics; cheap)
  size_t trace_spans = 0;          // >0: keep the last N stage spans for TraceJson()
};

struct ArrayView {
  std::string name;                // "jpg", "features.npz/embeddings", "cls", "__index__"
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;      // leading dimension is the batch
  uint8_t* data = nullptr;         // inside the batch's pooled buffer
  size_t nbytes = 0;
};

class Batch {
 public:
  virtual ~Batch() = default;
  virtual int64_t index() const = 0;    // batch number within the epoch, from 0
  virtual int size() const = 0;         // samples in it
  virtual const std::vector<ArrayView>& arrays() const = 0;
  virtual const std::vector<std::string>& keys() const = 0;  // "shard.tar:key"
};

// What the planner decided for this rank and epoch, so no drop or pad is silent.
struct PlanInfo {
  int64_t dataset_samples = 0;     // all samples in all shards
  int64_t rank_samples = 0;        // delivered to this rank per epoch (pads included)
  int64_t dropped_samples = 0;     // samples of the dataset no rank reads this epoch
  int64_t padded_samples = 0;      // repeats added to this rank
  int64_t batches = 0;             // per rank per epoch, equal on every rank
  int64_t num_shards = 0;
};

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Create(LoaderOptions options);
  virtual ~Loader() = default;     // cancels and joins every thread; returns promptly

  // Starts (or restarts) the epoch's plan from its first batch.
  virtual Status SetEpoch(uint64_t epoch) = 0;
  // The next batch in plan order; nullptr at the end of the epoch. Blocks
  // while the batch is being made. Errors name shard, member, offset, cause.
  virtual Result<std::shared_ptr<Batch>> Next() = 0;
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
};

// Expands sources (brace ranges, globs, list files) into existing shard paths.
Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& sources);

}  // namespace stoker
