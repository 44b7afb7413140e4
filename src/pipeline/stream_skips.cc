// pipeline/stream_skips.cc — see stream_skips.h.
#include "pipeline/stream_skips.h"

#include <algorithm>
#include <cstring>

#include "pipeline/skip_budget.h"

namespace stoker {

Status StreamSkips::Resolve(StreamBatch& work, uint64_t epoch, int64_t batch) {
  std::vector<StreamSlotFailure> failures;
  {
    std::lock_guard lock(work.failures_mu);
    failures.swap(work.failures);
  }
  const int size = layout_->batch_size;
  counts_.seen += size;
  for (StreamShardSkip& left : work.shards_left) {
    ++counts_.skipped;  // the sample being read; the rest of the shard is not counted
    last_cause_ = left.status.ToString() + " (the rest of the shard is skipped)";
    Note(epoch, batch, /*slot=*/-1, /*sample=*/0, std::move(left.shard));
  }
  if (failures.empty()) return CheckSkipBudget(*options_, counts_, last_cause_);
  std::sort(failures.begin(), failures.end(),
            [](const StreamSlotFailure& a, const StreamSlotFailure& b) { return a.slot < b.slot; });
  std::vector<bool> bad(static_cast<size_t>(size), false);
  for (StreamSlotFailure& f : failures) {
    bad[static_cast<size_t>(f.slot)] = true;
    ++counts_.skipped;
    last_cause_ = f.status.ToString();
    Note(epoch, batch, f.slot, static_cast<uint64_t>(f.sample), std::move(f.key));
  }
  STOKER_RETURN_IF_ERROR(CheckSkipBudget(*options_, counts_, last_cause_));
  if (failures.size() == static_cast<size_t>(size)) {
    return DataLoss("on_error='skip': every sample of batch " + std::to_string(batch) + " failed, so no slot can " +
                    "repeat a good one; the last: " + last_cause_);
  }
  uint8_t* base = work.lease->data();
  for (const StreamSlotFailure& f : failures) {
    int good = (f.slot + 1) % size;
    while (bad[static_cast<size_t>(good)]) good = (good + 1) % size;
    for (const ArraySlot& a : layout_->arrays) {
      std::memcpy(a.At(base, f.slot), a.At(base, good), a.sample_bytes);
    }
    if (!work.keys.empty()) {
      work.keys[static_cast<size_t>(f.slot)] = work.keys[static_cast<size_t>(good)];
      work.urls[static_cast<size_t>(f.slot)] = work.urls[static_cast<size_t>(good)];
    }
    ++counts_.refilled;
  }
  return Status::Ok();
}

void StreamSkips::Note(uint64_t epoch, int64_t batch, int slot, uint64_t sample, std::string key) {
  SkipRecord r;
  r.epoch = epoch;
  r.batch = batch;
  r.slot = slot;
  r.sample = sample;
  r.key = std::move(key);
  r.cause = last_cause_;
  log_.push_back(std::move(r));
  if (log_.size() > 10000) log_.erase(log_.begin());  // nobody takes them: keep the newest
}

std::vector<SkipRecord> StreamSkips::TakeLog() {
  std::vector<SkipRecord> out;
  out.swap(log_);
  return out;
}

nlohmann::json StreamSkips::ToJson() const {
  return {{"skipped", counts_.skipped}, {"refilled", counts_.refilled}, {"seen", counts_.seen}};
}

Status StreamSkips::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("loader state 'skip' is not an object");
  counts_ = {};
  for (auto [key, count] : {std::pair{"skipped", &counts_.skipped}, std::pair{"refilled", &counts_.refilled},
                            std::pair{"seen", &counts_.seen}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
      return InvalidArgument(std::string("loader state 'skip' lacks a non-negative integer '") + key + "'");
    }
    *count = j[key].get<int64_t>();
  }
  return Status::Ok();
}

}  // namespace stoker
