// pipeline/stream_run.h — the stream mode's threads (the indexed mode's is
// epoch_run.h): a rank's one endless stream of samples cut into batches.
//
//   producer: each source's shards of pass 0, 1, ... (stream_source.h), each
//   front to back (the next one opened and its first window read ahead on a
//   thread) ──▶ its shuffle buffer (drained at each pass's end) ──▶ the
//   source the order names (StreamMixOrder: a mixture's weights; one dataset
//   is one source) ──▶ slot of a pooled
//   batch ──DecodeTask──▶ decode_queue ──▶ decoders (decode_threads) ──▶ NextReady()
//
// From the slot on, the engine is the indexed mode's (batch_in_flight.h):
// decoders stage a batch's last GpuSlots images for GPU decode where image
// fields decode on the device (gpu_decode.h), and the decoder that writes a
// batch's last slot issues its copy to the device (device_stage.h).
//
// One producer reads, parses and shuffles, so the order of the samples is
// fixed by the seed alone; decoders only fill slots, and NextReady hands
// batches out in stream order whatever order they finished in. Sample i of
// the rank's stream is slot i % batch_size of batch i / batch_size; batches
// are numbered along the stream, across epochs (the loader cuts them).
// A run that starts at batch b (a restore, another epoch) replays each
// source from the start of a pass at or before its draws before b
// (StreamStart; the stream's start unless the caller knows a later one):
// those samples are read and shuffled but not decoded (the buffer's state
// depends on them), so it costs reading them. A pass starts with an empty
// buffer (the previous one drained it), so its start is a state known in
// full: each source records where each pass it makes begins (StartsAt), and
// a saved state carries them.
// Memory: the pool's batches, each source's shuffle buffer, read window and
// its read ahead, and next shard's first window, and the decode queue's
// samples: none grows with the dataset.
// A sample that fails to decode leaves its slot failed (BatchInFlight::
// failures, with the sample named): the loader raises the lowest slot's error, or with
// on_error="skip" fills it (stream_skips.h). A shard that cannot be opened,
// read or parsed ends the stream: the batch it would have filled returns the
// error (the batches before it are delivered). With on_error="skip" the
// stream leaves that shard there and goes on with the next, and the batch
// being filled then carries the error to the loader's skip log
// (StreamBatch::shards_left); a pass whose shards all fail ends the stream.
// Teardown (the destructor): cancel the producer's reads (io/cancel.h: a
// remote read in a retry back-off or on a stalled server gives up), the queue
// and the pool, join, reset the pool.
// Thread-safety: NextReady from one consumer thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/bounded_queue.h"
#include "core/buffer_pool.h"
#include "io/cancel.h"
#include "observe/recorder.h"
#include "pipeline/autotune.h"
#include "pipeline/batch_in_flight.h"
#include "pipeline/dataset.h"
#include "pipeline/mix_order.h"
#include "pipeline/shard_stream.h"
#include "pipeline/stream_source.h"
#include "stoker/loader.h"

namespace stoker {

// A shard the stream left early (on_error="skip"): it could not be opened,
// or could not be read or parsed on from some offset (a truncated tar); the
// sample being read then is lost with the rest of the shard.
struct StreamShardSkip {
  std::string shard;
  Status status;  // names the shard, and the member and offset where it broke
};

// A batch being filled (batch_in_flight.h: its slots count down as
// decoders finish them; `index` is its number along the rank's stream),
// with the shards the stream left while it filled.
struct StreamBatch : BatchInFlight {
  std::vector<StreamShardSkip> shards_left;  // set at delivery
  std::vector<uint32_t> slot_sources;        // a mixture: each slot's source (a skip repeats one of its own)
};

class StreamRun {
 public:
  // `head` (may be null): the first source's first shard, read up to its
  // first sample (used only where that source begins at its stream's start).
  // starts: where each source is taken up (empty: every stream's start);
  // order: which source each position draws from (the loader's: weights
  // changed at a restore rebase it).
  StreamRun(const StreamDataset* data, std::shared_ptr<BufferPool> pool, StreamMixOrder order, int64_t first_batch,
            std::unique_ptr<StreamHead> head = nullptr, std::vector<StreamStart> starts = {});
  ~StreamRun();
  StreamRun(const StreamRun&) = delete;
  StreamRun& operator=(const StreamRun&) = delete;

  // The next batch along the stream once all its slots are written. wait_ms >
  // 0: null after that long without it (nothing consumed); timeout_ms (the
  // options') counts from `since`.
  Result<std::unique_ptr<StreamBatch>> NextReady(int wait_ms, std::chrono::steady_clock::time_point since);
  // The number of the batch NextReady returns next.
  int64_t next_batch() const { return next_deliver_; }
  // The tuner's settings (consumer thread): decode threads and prefetch take
  // effect at once, within data->tune_max; the order does not change (one
  // producer places every sample).
  void Apply(const TuneSettings& t);
  // CPU time of the run's threads so far (the tuner's evidence).
  uint64_t ThreadCpuNs() const;
  // Each source's latest pass this run began at or before its draws before
  // the stream's sample `position` (a batch's first); nullopt if a source
  // began none by then.
  std::optional<std::vector<StreamStart>> StartsAt(uint64_t position) const;

 private:
  struct DecodeTask {
    StreamBatch* batch;
    int slot;
    uint64_t position;  // along the rank's stream
    StreamSample sample;
  };
  void Produce();
  // Queues the stream's next sample, of source `source`, to decode into its slot. False once cancelled.
  bool Emit(StreamSample sample, uint32_t source);
  void Fail(Status st);  // the stream ends here: the batch being filled returns st
  // Shard `shard` broke with st: false (the stream failed) unless on_error="skip",
  // which leaves the shard and notes it for the batch being filled.
  bool LeaveShard(uint32_t shard, Status st);
  // Decoder i (its id in the recorder's spans: `thread`) decodes while i is
  // below the active count.
  void DecodeLoop(int i, uint32_t thread);
  void SpawnDecodersUpTo(int n);
  // Decoder i may go on (false: cancelled).
  bool AwaitTurn(int i);
  static constexpr uint32_t kProducerThread = 1;
  // Counts a slot written (failed: its failure recorded); the last one readies the batch.
  void Finish(StreamBatch* batch, std::optional<FailedSlot> failure);

  const StreamDataset* data_;
  std::shared_ptr<BufferPool> pool_;
  const int64_t first_batch_;
  StreamMixOrder order_;       // which source each position draws from
  Cancellation cancel_reads_;  // the producer's remote reads obey it
  std::vector<std::unique_ptr<StreamSource>> sources_;  // producer only (StartsAt: their own lock)
  uint64_t position_ = 0;          // producer only: the stream's next sample
  bool replaying_ = false;         // producer only: the sources replay to the run's first batch
  StreamBatch* filling_ = nullptr;  // producer only: the batch position_ falls in, once begun

  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::condition_variable room_;   // the producer's prefetch gate, and parked decoders
  std::atomic<int> active_decoders_{1};
  int prefetch_ = 1;               // guarded by mu_: batches begun and not delivered, at most
  std::map<int64_t, std::unique_ptr<StreamBatch>> in_flight_;  // guarded by mu_
  std::map<int64_t, std::vector<StreamShardSkip>> shards_left_;  // guarded by mu_: by the batch then filling
  int64_t next_deliver_;                                      // guarded by mu_ (read by its thread)
  bool cancelled_ = false;                                    // guarded by mu_
  int64_t failed_at_ = -1;                                    // guarded by mu_: the batch the stream ended in
  Status failure_;                                            // guarded by mu_

  BoundedQueue<DecodeTask> decode_queue_;
  std::thread producer_;
  std::vector<std::thread> decoders_;
};

}  // namespace stoker
