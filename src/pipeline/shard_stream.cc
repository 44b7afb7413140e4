// pipeline/shard_stream.cc — see shard_stream.h.
#include "pipeline/shard_stream.h"

namespace stoker {

Result<std::unique_ptr<ShardStream>> ShardStream::Open(const std::string& path, uint32_t shard,
                                                      const IoOptions& io, bool first) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> reader, OpenReader(path, io));
  return std::unique_ptr<ShardStream>(new ShardStream(std::move(reader), shard, first));
}

ShardStream::ShardStream(std::unique_ptr<RandomAccessReader> reader, uint32_t shard, bool first)
    : reader_(std::move(reader)), tar_(*reader_, reader_->Size(), first), shard_(shard) {}

Status ShardStream::Add(const TarMember& m, std::string_view field) {
  StreamSample& s = *open_;
  if (s.entry.FindExact(field)) {
    return DataLoss(reader_->Name() + ": member '" + m.name + "' at offset " + std::to_string(m.header_offset) +
                    ": field '" + std::string(field) + "' twice in sample '" + s.entry.key + "'");
  }
  const uint64_t end = m.data_offset + m.size;
  // The data only (the sample is packed): not the headers and padding before it.
  STOKER_RETURN_IF_ERROR(tar_.Append(m.data_offset, end, &s.bytes));
  s.entry.members.push_back(MemberRef{std::string(field), m.name, m.data_offset, m.size});
  s.entry.end = end;
  return Status::Ok();
}

Result<std::optional<StreamSample>> ShardStream::Next() {
  while (!done_) {
    std::optional<TarMember> m = std::move(ahead_);
    ahead_.reset();
    if (!m) {
      STOKER_ASSIGN_OR_RETURN(m, tar_.Next());
      if (!m) {
        done_ = true;
        break;
      }
    }
    std::string_view key, field;
    if (!SplitKey(m->name, &key, &field)) continue;  // README, .DS_Store: in no sample, as in webdataset
    if (open_ && key == open_->entry.key) {
      STOKER_RETURN_IF_ERROR(Add(*m, field));
      continue;
    }
    if (open_) {  // a new key: the open sample is complete
      ahead_ = std::move(m);
      return Complete();
    }
    open_.emplace();
    open_->shard = shard_;
    open_->entry.key = std::string(key);
    open_->entry.begin = m->header_offset;
    open_->entry.end = m->header_offset;
    open_->entry.packed = true;
    STOKER_RETURN_IF_ERROR(Add(*m, field));
  }
  return Complete();
}

std::optional<StreamSample> ShardStream::Complete() {
  std::optional<StreamSample> out = std::move(open_);
  open_.reset();
  // A sample waits in the shuffle buffer with its bytes: without this, the
  // growth left by appending members (a small member after a large one
  // doubles the vector) is held too, up to twice the sample's bytes.
  if (out) out->bytes.shrink_to_fit();
  return out;
}

}  // namespace stoker
