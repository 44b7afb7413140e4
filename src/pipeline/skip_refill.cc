// pipeline/skip_refill.cc — the skip policy's refills and budget; see skip_refill.h.
#include "pipeline/skip_refill.h"

#include <algorithm>
#include <cstring>

#include "pipeline/mix_seed.h"
#include "pipeline/sample_keys.h"
#include "pipeline/skip_ledger.h"

namespace stoker {

void SkipRefiller::StartEpoch(uint64_t epoch) {
  epoch_ = epoch;
  reserve_cursor_ = 0;
  known_bad_.clear();
}

Status SkipRefiller::Resolve(BatchInFlight& work, const EpochPlan& plan) {
  std::vector<SlotFailure> failures;
  for (const FailedSlot& f : work.failures) failures.push_back({f.slot, f.status.ToString()});
  work.failures.clear();
  STOKER_RETURN_IF_ERROR(Resolve({work.index, work.size, work.lease->data(), &work.keys, &work.urls},
                                 std::move(failures), plan));
  work.error_slot = -1;
  work.error = Status::Ok();
  return Status::Ok();
}

Status SkipRefiller::Resolve(const Target& batch, std::vector<SlotFailure> failures, const EpochPlan& plan) {
  ledger_.counts.seen += batch.size;
  if (failures.empty()) return ledger_.CheckBudget(data_->options);
  const int64_t bs = data_->options.batch_size;
  // Slot order, not completion order: the refills must not depend on timing.
  std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.slot < b.slot; });
  const uint64_t partition = static_cast<uint64_t>(plan.info.rank_samples);
  // A mixture refills a slot from the source of its bad sample (the reserve
  // passes over the others' samples), so a bad sample does not move the
  // batch's shares.
  const std::vector<uint32_t>& mix_shards = data_->options.mix.shards;
  auto source_of = [&](uint32_t shard) {
    uint32_t s = 0;
    for (uint64_t first = 0; s + 1 < mix_shards.size() && shard >= first + mix_shards[s]; ++s) first += mix_shards[s];
    return s;
  };
  for (const SlotFailure& failure : failures) {
    if (failure.slot < 0 || failure.slot >= batch.size) {
      return InvalidArgument("batch " + std::to_string(batch.index) + " of " + std::to_string(batch.size) +
                             " samples has no slot " + std::to_string(failure.slot) + " to refill");
    }
    const SampleRef bad = plan.At(batch.index * bs + failure.slot);
    NoteBad(batch.index, failure.slot, bad, failure.cause);
    uint64_t tries = 0;
    while (true) {
      STOKER_RETURN_IF_ERROR(ledger_.CheckBudget(data_->options));
      if (++tries > partition) {
        return DataLoss("on_error='skip': no good sample left in this rank's partition of " +
                        std::to_string(partition) + " samples to refill batch " + std::to_string(batch.index) +
                        "; the last error: " + ledger_.last_cause());
      }
      const SampleRef cand = plan.At(static_cast<int64_t>(reserve_cursor_ % partition));
      ++reserve_cursor_;
      if (known_bad_.count(cand.global)) continue;
      if (!mix_shards.empty() && source_of(cand.shard) != source_of(bad.shard)) continue;
      Status st = Fill(batch, failure.slot, cand);
      if (st.ok()) {
        ++ledger_.counts.refilled;
        break;
      }
      NoteBad(batch.index, failure.slot, cand, st.ToString());
    }
  }
  return ledger_.CheckBudget(data_->options);
}

Status SkipRefiller::Fill(const Target& batch, int slot, const SampleRef& ref) {
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<const ShardIndex> held, data_->indexes->Get(ref.shard));
  const ShardIndex& shard_index = *held;
  SampleView entry = shard_index.samples[ref.sample];
  const std::string& shard = data_->shards[ref.shard];
  Result<std::shared_ptr<const RandomAccessReader>> file = files_->Get(ref.shard);
  std::span<uint8_t> bytes;
  Status st = file.status();
  if (file.ok() && shard_index.parquet) {  // a row's values, laid out as members (formats/parquet_file.h)
    row_bytes_.clear();
    st = data_->parquet_rows->Read(shard_index, **file, ref.sample, &row_bytes_, &row_entry_);
    if (st.ok()) entry = row_entry_;  // else the index's entry names the row
    bytes = row_bytes_;
  } else if (file.ok()) {
    bytes_.resize(entry.end - entry.begin);
    st = (*file)->PRead(entry.begin, bytes_);
    bytes = bytes_;
  }
  if (!st.ok()) return st.WithContext("sample '" + std::string(entry.key) + "'");
  if (!decoder_) {
    decoder_ = std::make_unique<SampleDecoder>(&data_->layout, data_->upscales.get(), data_->options.sample_map.get());
  }
  uint8_t* base = batch.base;
  STOKER_RETURN_IF_ERROR(
      decoder_->Decode(shard, entry, bytes, base, slot, MixSeed(data_->options.seed, epoch_, ref.global)));
  const BatchLayout& layout = data_->layout;
  const ArraySlot& index = layout.arrays[layout.index_array];
  const int64_t global = static_cast<int64_t>(ref.global);
  std::memcpy(index.At(base, slot), &global, sizeof(global));
  if (batch.keys && !batch.keys->empty()) {
    STOKER_ASSIGN_OR_RETURN((*batch.keys)[static_cast<size_t>(slot)], UserKey(data_->options, shard, entry, bytes));
    (*batch.urls)[static_cast<size_t>(slot)] = shard;
  }
  return Status::Ok();
}

void SkipRefiller::NoteBad(int64_t batch, int slot, const SampleRef& ref, std::string cause) {
  if (!known_bad_.insert(ref.global).second) return;  // met before this epoch: counted and logged then
  ++ledger_.counts.seen;
  SkipRecord r;
  r.epoch = epoch_;
  r.batch = batch;
  r.slot = slot;
  r.sample = ref.global;
  // Its index served the failed read or decode a moment ago: held, or loaded again.
  Result<std::shared_ptr<const ShardIndex>> index = data_->indexes->Get(ref.shard);
  r.key = index.ok() ? InternalKey(data_->shards[ref.shard], (*index)->samples[ref.sample])
                     : data_->shards[ref.shard] + ":" + std::to_string(ref.sample);
  ledger_.Skip(std::move(r), std::move(cause));
}

nlohmann::json SkipRefiller::ToJson() const {
  return {{"reserve_cursor", reserve_cursor_},
          {"known_bad", std::vector<uint64_t>(known_bad_.begin(), known_bad_.end())},
          {"skipped", ledger_.counts.skipped},
          {"refilled", ledger_.counts.refilled},
          {"seen", ledger_.counts.seen}};
}

Status SkipRefiller::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("loader state 'skip' is not an object");
  try {
    if (j.contains("reserve_cursor")) reserve_cursor_ = j["reserve_cursor"].get<uint64_t>();
    if (j.contains("known_bad")) {
      known_bad_.clear();
      for (const auto& v : j["known_bad"]) known_bad_.insert(v.get<uint64_t>());
    }
    if (j.contains("skipped")) ledger_.counts.skipped = j["skipped"].get<int64_t>();
    if (j.contains("refilled")) ledger_.counts.refilled = j["refilled"].get<int64_t>();
    if (j.contains("seen")) ledger_.counts.seen = j["seen"].get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("loader state 'skip' is malformed: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace stoker
