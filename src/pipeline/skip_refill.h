// pipeline/skip_refill.h — on_error=skip: drop a bad sample, refill its slot,
// keep the budget.
//
// Refills are made at delivery time, in batch order and then slot order, on
// the consumer's thread: when the batch due next has failed slots, each one
// (lowest slot first) takes the next sample of the rank's reserve, which is
// the rank's own partition of this epoch read again from its start. A reserve
// sample already known bad is passed over; one that fails is skipped in turn
// and the slot takes the next. The sample order therefore depends only on the
// data (which samples are bad) and the plan, never on thread timing, and every
// batch stays full, so ranks keep equal batch counts. Repeats are counted as
// refilled. Each distinct bad sample is counted and logged once per epoch.
// In a mixture the reserve hands a slot only samples of its bad sample's
// source (pipeline/mix_order.h), passing over the others'.
//
// The budget (max_skips, max_skip_fraction after skip_probation samples)
// turns a systemic fault into an error naming the budget. The reserve cursor,
// the known-bad set and the counts are part of the loader's state, so a
// restore continues the same stream.
// Thread-safety: one consumer thread (the Loader's).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/batch_in_flight.h"
#include "pipeline/dataset.h"
#include "pipeline/planner.h"
#include "pipeline/sample_decoder.h"
#include "pipeline/shard_files.h"
#include "pipeline/skip_ledger.h"
#include "stoker/loader.h"

namespace stoker {

class SkipRefiller {
 public:
  SkipRefiller(const Dataset* data, ShardFiles* files) : data_(data), files_(files) {}

  // A new epoch's stream: the reserve starts again at the partition's first sample.
  void StartEpoch(uint64_t epoch);

  // Resolves a batch whose first pass is complete: fails slots under the
  // budget, refills them, counts the batch's samples as seen. On error the
  // batch must not be delivered.
  Status Resolve(BatchInFlight& work, const EpochPlan& plan);

  // Where a refill writes: a batch buffer laid out as the dataset's layout,
  // and the batch's keys and urls (empty: not kept).
  struct Target {
    int64_t index = 0;  // the rank's batch
    int size = 0;
    uint8_t* base = nullptr;
    std::vector<std::string>* keys = nullptr;
    std::vector<std::string>* urls = nullptr;
  };
  // As above for a batch another loader made and left its failed slots in
  // (Loader::Receive); `plan` is the rank's whole plan of the epoch.
  Status Resolve(const Target& batch, std::vector<SlotFailure> failures, const EpochPlan& plan);

  SkipCounts counts() const { return ledger_.counts; }
  std::vector<SkipRecord> TakeLog() { return ledger_.TakeLog(); }

  nlohmann::json ToJson() const;
  Status FromJson(const nlohmann::json& j);  // absent fields keep a fresh epoch's values

 private:
  // Reads and decodes `ref` into `slot` of the batch (keys, __index__ too).
  Status Fill(const Target& batch, int slot, const SampleRef& ref);
  // Counts a bad sample (once per epoch) and logs it.
  void NoteBad(int64_t batch, int slot, const SampleRef& ref, std::string cause);

  const Dataset* data_;
  ShardFiles* files_;
  std::unique_ptr<SampleDecoder> decoder_;  // made on the first refill
  std::vector<uint8_t> bytes_;
  RowBytes row_bytes_;    // a Parquet row's values
  SampleEntry row_entry_;  // and its members

  uint64_t epoch_ = 0;
  uint64_t reserve_cursor_ = 0;   // next partition position the reserve hands out
  std::set<uint64_t> known_bad_;  // this epoch's bad samples (dataset indexes)
  SkipLedger ledger_;
};

}  // namespace stoker
