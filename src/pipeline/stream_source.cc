// pipeline/stream_source.cc — see stream_source.h.
#include "pipeline/stream_source.h"

#include "observe/clock.h"
#include "pipeline/mix_seed.h"
#include "pipeline/stream_order.h"

namespace stoker {

namespace {

// Opens a shard and reads its first sample, obeying `cancel` (on whichever thread).
Result<std::unique_ptr<StreamHead>> OpenHead(const StreamDataset& data, uint32_t shard, Cancellation* cancel) {
  CancelScope scope(cancel);
  auto head = std::make_unique<StreamHead>();
  STOKER_ASSIGN_OR_RETURN(head->shard, ShardStream::Open(data.shards[shard], shard, *data.options.storage));
  STOKER_ASSIGN_OR_RETURN(head->first, head->shard->Next());
  return head;
}

}  // namespace

uint64_t StreamSourceSeed(const LoaderOptions& options, uint32_t source) {
  constexpr uint64_t kSourceKey = 0x4D49585354524D53ULL;  // "MIXSTRMS"
  return options.mix.names.empty() ? options.seed : MixSeed(options.seed ^ kSourceKey, source);
}

StreamSource::StreamSource(const StreamDataset* data, std::vector<uint32_t> shards, uint64_t seed, StreamStart start,
                           std::unique_ptr<StreamHead> head, Cancellation* cancel, LeaveShard leave)
    : data_(data),
      shards_(std::move(shards)),
      seed_(seed),
      cancel_(cancel),
      leave_(std::move(leave)),
      head_(start.pass == 0 && start.position == 0 ? std::move(head) : nullptr),
      buffer_(data->options.shuffle ? static_cast<size_t>(data->options.shuffle_buffer) : 1, 0),
      drawn_(start.position) {
  BeginPass(start.pass);
}

StreamSource::~StreamSource() {
  if (following_.valid()) following_.wait();  // its thread reads data_ and obeys cancel_
}

std::vector<uint32_t> StreamSource::PassShards(uint64_t pass) const {
  const LoaderOptions& o = data_->options;
  std::vector<uint32_t> list = StreamPassShards(seed_, pass, static_cast<uint32_t>(shards_.size()), o.rank,
                                                o.world_size, o.shuffle);
  for (uint32_t& i : list) i = shards_[i];
  return list;
}

void StreamSource::BeginPass(uint64_t pass) {
  pass_ = pass;
  list_ = PassShards(pass);
  at_ = 0;
  draining_ = false;
  any_ = false;
  last_left_ = Status::Ok();
  // The buffer's draws depend on the seed, the rank (each rank its own
  // stream) and the pass; it is empty here: the last pass drained it.
  buffer_.Reseed(MixSeed(seed_, static_cast<uint64_t>(data_->options.rank), 0x42554646ull + pass));
  std::lock_guard lock(mu_);
  pass_starts_[drawn_] = pass;
}

Result<std::optional<StreamSample>> StreamSource::Next(bool read_ahead) {
  auto leave = [&](uint32_t shard, Status st) {
    last_left_ = st;
    ended_ = !leave_(shard, std::move(st));
    return !ended_;
  };
  while (true) {
    if (ended_ || cancel_->cancelled()) return std::optional<StreamSample>();
    if (draining_) {  // the pass's end: what the buffer holds goes out before the next pass's samples come in
      if (std::optional<StreamSample> out = buffer_.Drain()) {
        ++drawn_;
        return out;
      }
      if (!any_) {
        return DataLoss("stream mode: rank " + std::to_string(data_->options.rank) + "'s shards of pass " +
                        std::to_string(pass_) + " hold no samples" +
                        (last_left_.ok() ? std::string() : "; the last shard left: " + last_left_.ToString()));
      }
      BeginPass(pass_ + 1);
      continue;
    }
    if (!reading_) {
      if (at_ == list_.size()) {
        draining_ = true;
        continue;
      }
      const uint32_t shard = list_[at_];
      if (head_ && pass_ == 0 && at_ == 0) {  // the stream's first shard, its first sample read by the loader
        reading_ = std::move(head_);
      } else {
        Result<std::unique_ptr<StreamHead>> got =
            following_.valid() ? following_.get() : OpenHead(*data_, shard, cancel_);
        if (got.ok()) {
          reading_ = std::move(got).value();
        } else {
          if (!leave(shard, got.status())) return std::optional<StreamSample>();
          reading_ = std::make_unique<StreamHead>();  // no samples: on to the next shard
        }
      }
      next_ = std::move(reading_->first);
    } else if (read_pending_) {
      // The sample after the one last pushed, read only now: a shard left
      // here is noted for the batch after the sample that went out before it.
      read_pending_ = false;
      const uint64_t begin = NowNs();
      Result<std::optional<StreamSample>> read = reading_->shard->Next();
      if (!read.ok()) {
        if (!leave(list_[at_], read.status())) return std::optional<StreamSample>();
        reading_.reset();  // the shard is left here: on to the next
        ++at_;
        continue;
      }
      next_ = std::move(read).value();
      if (Recorder* rec = data_->recorder; rec && next_) {
        const uint64_t end = NowNs();
        rec->read.Add(next_->data().size(), end - begin);
        rec->AddSourceRead(list_[at_], next_->data().size(), end - begin);  // a mixture's reads by source
        rec->AddSpan({SpanKind::kRead, 1, begin, end, -1, -1});  // the producer's; its place: once shuffled
      }
    }
    if (!next_) {
      reading_.reset();
      ++at_;
      continue;
    }
    if (read_ahead && !following_.valid()) {
      const uint32_t after = at_ + 1 < list_.size() ? list_[at_ + 1] : PassShards(pass_ + 1).front();
      following_ = std::async(std::launch::async, OpenHead, std::cref(*data_), after, cancel_);
    }
    any_ = true;
    std::optional<StreamSample> out = buffer_.Push(std::move(*next_));
    next_.reset();
    read_pending_ = true;
    if (out) {
      ++drawn_;
      return out;
    }
  }
}

Result<bool> StreamSource::SkipTo(uint64_t to) {
  while (drawn_ < to) {
    STOKER_ASSIGN_OR_RETURN(std::optional<StreamSample> dropped, Next(/*read_ahead=*/true));
    if (!dropped) return false;
  }
  return true;
}

std::optional<StreamStart> StreamSource::PassAt(uint64_t draw) const {
  std::lock_guard lock(mu_);
  auto it = pass_starts_.upper_bound(draw);
  if (it == pass_starts_.begin()) return std::nullopt;
  --it;
  return StreamStart{it->second, it->first};
}

}  // namespace stoker
