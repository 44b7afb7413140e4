// pipeline/stream_skips.h — on_error="skip" in stream mode: a bad sample's
// slot takes a repeat of a good sample of the same batch.
//
// A stream cannot read a sample again (the indexed mode refills from the
// rank's partition read again from its start: skip_refill.h), and moving
// every later sample up a slot would mean decoding each sample into scratch
// and copying it once its place is known, the good ones too. So, at
// delivery, on the consumer's thread, each failed slot (lowest first) takes
// a copy of the batch's next good slot after it, wrapping round (in a
// mixture, the next of its own source where the batch holds one): its arrays
// (__index__ too: the repeat is visible), key and url. The batch stays full,
// so ranks keep equal batch counts, and what it holds depends only on the
// data (which samples are bad), never on thread timing; a restore meets the
// same bad samples in the same places again, so the loader's state carries
// only the counts. A slot repeated from one whose images were staged for
// GPU decode (gpu_decode.h) holds that slot's JPEG, not its pixels: its GPU
// jobs are repeated too (GpuJobs::Repeat). Each bad sample met is counted and logged (a later pass
// meets it, and counts it, again); `seen` counts the stream's samples tried,
// batch_size a batch. A shard the stream left early (stream_run.h) is
// logged with slot -1 and its path as the key, and counted as one skipped
// sample (the one being read; how many more it held is not known). A batch
// with no good sample, or a budget exceeded (skip_ledger.h), is an error
// naming the last cause.
// Thread-safety: one consumer thread (the loader's).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/batch_layout.h"
#include "pipeline/skip_ledger.h"
#include "pipeline/stream_run.h"
#include "stoker/loader.h"

namespace stoker {

class StreamSkips {
 public:
  StreamSkips(const LoaderOptions* options, const BatchLayout* layout) : options_(options), layout_(layout) {}

  // Counts the batch's samples; fills its failed slots, or says why not.
  // `epoch` and `batch` (the loader's numbering) go into the log.
  Status Resolve(StreamBatch& work, uint64_t epoch, int64_t batch);

  SkipCounts counts() const { return ledger_.counts; }
  std::vector<SkipRecord> TakeLog() { return ledger_.TakeLog(); }

  nlohmann::json ToJson() const;
  Status FromJson(const nlohmann::json& j);  // absent counts stay 0

 private:
  // Counts and logs the sample (or, slot -1, the shard) `key` as skipped for `cause`.
  void Note(uint64_t epoch, int64_t batch, int slot, uint64_t sample, std::string key, std::string cause);

  const LoaderOptions* options_;
  const BatchLayout* layout_;
  SkipLedger ledger_;
};

}  // namespace stoker
