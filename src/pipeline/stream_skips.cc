// pipeline/stream_skips.cc — see stream_skips.h.
#include "pipeline/stream_skips.h"

#include <algorithm>
#include <cstring>

#include "pipeline/sample_map.h"
#include "pipeline/skip_ledger.h"

namespace stoker {

Status StreamSkips::Resolve(StreamBatch& work, uint64_t epoch, int64_t batch) {
  std::vector<FailedSlot> failures;
  {
    std::lock_guard lock(work.error_mu);
    failures.swap(work.failures);
  }
  const int size = layout_->batch_size;
  ledger_.counts.seen += size;
  for (StreamShardSkip& left : work.shards_left) {  // counted as the sample being read; the rest is not counted
    Note(epoch, batch, /*slot=*/-1, /*sample=*/0, std::move(left.shard),
         left.status.ToString() + " (the rest of the shard is skipped)");
  }
  if (failures.empty()) return ledger_.CheckBudget(*options_);
  std::sort(failures.begin(), failures.end(), [](const FailedSlot& a, const FailedSlot& b) { return a.slot < b.slot; });
  std::vector<bool> bad(static_cast<size_t>(size), false);
  for (FailedSlot& f : failures) {
    bad[static_cast<size_t>(f.slot)] = true;
    Note(epoch, batch, f.slot, static_cast<uint64_t>(f.sample), std::move(f.key), f.status.ToString());
  }
  STOKER_RETURN_IF_ERROR(ledger_.CheckBudget(*options_));
  if (failures.size() == static_cast<size_t>(size)) {
    return DataLoss("on_error='skip': every sample of batch " + std::to_string(batch) + " failed, so no slot can " +
                    "repeat a good one; the last: " + ledger_.last_cause());
  }
  uint8_t* base = work.lease->data();
  for (const FailedSlot& f : failures) {
    // The next good slot after it, wrapping round; in a mixture, the next of its own source where the batch has one.
    auto next_good = [&](bool own_source) {
      for (int k = 1; k < size; ++k) {
        const size_t c = static_cast<size_t>((f.slot + k) % size);
        if (!bad[c] && (!own_source || work.slot_sources[c] == work.slot_sources[static_cast<size_t>(f.slot)])) {
          return static_cast<int>(c);
        }
      }
      return -1;
    };
    int good = work.slot_sources.empty() ? -1 : next_good(true);
    if (good < 0) good = next_good(false);
    for (const ArraySlot& a : layout_->arrays) {
      std::memcpy(a.At(base, f.slot), a.At(base, good), a.sample_bytes);
    }
    if (options_->sample_map) options_->sample_map->CopySlot(*layout_, base, good, f.slot);  // its own values too
    work.gpu.Repeat(good, f.slot, *layout_);  // the good slot's images staged for the GPU decode into this one too
    if (!work.keys.empty()) {
      work.keys[static_cast<size_t>(f.slot)] = work.keys[static_cast<size_t>(good)];
      work.urls[static_cast<size_t>(f.slot)] = work.urls[static_cast<size_t>(good)];
    }
    ++ledger_.counts.refilled;
  }
  return Status::Ok();
}

void StreamSkips::Note(uint64_t epoch, int64_t batch, int slot, uint64_t sample, std::string key,
                       std::string cause) {
  SkipRecord r;
  r.epoch = epoch;
  r.batch = batch;
  r.slot = slot;
  r.sample = sample;
  r.key = std::move(key);
  ledger_.Skip(std::move(r), std::move(cause));
}

nlohmann::json StreamSkips::ToJson() const {
  const SkipCounts& c = ledger_.counts;
  return {{"skipped", c.skipped}, {"refilled", c.refilled}, {"seen", c.seen}};
}

Status StreamSkips::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("loader state 'skip' is not an object");
  SkipCounts& c = ledger_.counts;
  c = {};
  for (auto [key, count] : {std::pair{"skipped", &c.skipped}, std::pair{"refilled", &c.refilled},
                            std::pair{"seen", &c.seen}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      return InvalidArgument(std::string("loader state 'skip' lacks a non-negative integer '") + key + "'");
    }
    *count = j[key].get<int64_t>();
  }
  return Status::Ok();
}

}  // namespace stoker
