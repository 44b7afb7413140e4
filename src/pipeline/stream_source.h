// pipeline/stream_source.h — one source's samples for a rank in stream mode,
// pulled one at a time: its shards pass by pass (stream_order.h: permuted
// per pass with the source's seed, every world_size-th one this rank's),
// each read front to back (shard_stream.h), through a shuffle buffer that
// each pass's end drains (shuffle_buffer.h). A stream of one dataset is one
// such source; a mixture (MixOptions) has one per source, and the run
// (stream_run.h) pulls from the one its order names (mix_order.h,
// StreamMixOrder).
//
// Its draws are counted from its stream's start: draw d is the d-th sample
// Next returns. A pass starts with an empty buffer, so a pass's first draw
// is a state known in full: PassAt gives the latest one begun at or before a
// draw, and a source made with that start replays from there (SkipTo).
// Reads ahead: while a shard is read, the next one (the next pass's first
// after the last) is opened and its first window read on a thread of its
// own, so a shard's start (a HEAD and a GET over HTTP) overlaps the previous
// shard's parse.
// A shard that cannot be opened, read or parsed is handed to `leave` (the
// run's on_error policy): false ends the stream; true goes on with the next
// shard. A pass whose shards hold no sample ends it with an error.
// Thread-safety: Next and SkipTo from one thread (the run's producer);
// PassAt from any.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "io/cancel.h"
#include "pipeline/dataset.h"
#include "pipeline/shard_stream.h"
#include "pipeline/shuffle_buffer.h"

namespace stoker {

// A shard opened and its first sample read (none: the shard holds none).
// The stream's first (pass 0's first for the rank) is read by the loader to
// learn the layout, and the first run goes on from there rather than open
// and read it again.
struct StreamHead {
  std::unique_ptr<ShardStream> shard;
  std::optional<StreamSample> first;
};

// Where a source's stream is taken up: pass `pass`, whose first sample is
// the source's draw `position`.
struct StreamStart {
  uint64_t pass = 0;
  uint64_t position = 0;
};

// Source `source`'s seed: the loader's for one dataset, else one of its own.
uint64_t StreamSourceSeed(const LoaderOptions& options, uint32_t source);

class StreamSource {
 public:
  // Shard `shard` broke with the status: true to go on without it.
  using LeaveShard = std::function<bool(uint32_t shard, Status status)>;

  // shards: the dataset's shard numbers of this source, in its given order;
  // seed: its shard permutation's (the buffer's follows from it, the rank
  // and the pass); head (may be null): its first shard of pass 0, read up
  // to its first sample, used only from the stream's start.
  StreamSource(const StreamDataset* data, std::vector<uint32_t> shards, uint64_t seed, StreamStart start,
               std::unique_ptr<StreamHead> head, Cancellation* cancel, LeaveShard leave);
  ~StreamSource();
  StreamSource(const StreamSource&) = delete;
  StreamSource& operator=(const StreamSource&) = delete;

  // The next draw; nullopt where the stream ends: `leave` refused a shard,
  // or it was cancelled. read_ahead false: no next shard is opened meanwhile
  // (the run's first batch costs its own reads only). An error: a pass held no sample.
  Result<std::optional<StreamSample>> Next(bool read_ahead);
  // Draws up to draw `to` (exclusive), read and dropped: a restore replays
  // from its pass's start. False where the stream ends first (as Next).
  Result<bool> SkipTo(uint64_t to);
  // The latest pass begun at or before draw `draw`; nullopt if none was.
  std::optional<StreamStart> PassAt(uint64_t draw) const;

 private:
  std::vector<uint32_t> PassShards(uint64_t pass) const;
  void BeginPass(uint64_t pass);

  const StreamDataset* data_;
  const std::vector<uint32_t> shards_;
  const uint64_t seed_;
  Cancellation* cancel_;
  LeaveShard leave_;
  std::unique_ptr<StreamHead> head_;  // the stream's first shard, until pass 0 reads it
  ShuffleBuffer<StreamSample> buffer_;
  uint64_t pass_ = 0;
  uint64_t drawn_ = 0;
  std::vector<uint32_t> list_;                 // this pass's shards, dataset numbers
  size_t at_ = 0;                              // the shard of list_ being read
  std::unique_ptr<StreamHead> reading_;        // its stream, once opened
  std::optional<StreamSample> next_;           // its next sample, read
  bool read_pending_ = false;                  // the sample after the one last pushed is yet to be read
  bool ended_ = false;                         // `leave` refused a shard: the stream ends
  bool draining_ = false;                      // the pass's shards are read: the buffer empties
  bool any_ = false;                           // the pass gave a sample
  Status last_left_;                           // the last shard left this pass
  std::future<Result<std::unique_ptr<StreamHead>>> following_;  // the shard after this one, opening

  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> pass_starts_;  // guarded by mu_: first draw -> pass
};

}  // namespace stoker
