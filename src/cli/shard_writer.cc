// cli/shard_writer.cc — see shard_writer.h.
#include "cli/shard_writer.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cli/common.h"

namespace stoker::cli {
namespace {

constexpr uint64_t kBlock = 512;
uint64_t RoundUp(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

// What a member costs in the tar: its header (plus a pax header for a long
// name), its data padded to a block.
uint64_t TarCost(const PackMember& m) {
  return kBlock + (m.name.size() >= 100 ? 3 * kBlock : 0) + RoundUp(m.data.size());
}

}  // namespace

ShardWriter::~ShardWriter() {
  if (tar_) {
    tar_.reset();  // closes the descriptor
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
  }
}

Status ShardWriter::OpenShard() {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), "-%06zu.tar", shard_paths_.size());
  final_path_ = prefix_ + suffix;
  tmp_path_ = final_path_ + ".tmp";
  members_.clear();
  shard_samples_ = 0;
  STOKER_ASSIGN_OR_RETURN(TarWriter tar, TarWriter::Create(tmp_path_));
  tar_.emplace(std::move(tar));
  return Status::Ok();
}

Status ShardWriter::AddSample(const std::vector<PackMember>& members) {
  uint64_t cost = 0;
  for (const PackMember& m : members) cost += TarCost(m);
  if (tar_ && shard_samples_ > 0 && tar_->bytes_written() + cost + 2 * kBlock > target_bytes_) {
    STOKER_RETURN_IF_ERROR(CloseShard());
  }
  if (!tar_) STOKER_RETURN_IF_ERROR(OpenShard());
  for (const PackMember& m : members) {
    const uint64_t header_offset = tar_->bytes_written();
    STOKER_RETURN_IF_ERROR(tar_->Add(m.name, m.data));
    // The data is the last padded block run of what Add wrote, whatever
    // extended headers came before it.
    const uint64_t data_offset = tar_->bytes_written() - RoundUp(m.data.size());
    members_.push_back({m.name, header_offset, data_offset, m.data.size()});
  }
  ++shard_samples_;
  ++samples_;
  return Status::Ok();
}

Status ShardWriter::CloseShard() {
  STOKER_RETURN_IF_ERROR(tar_->Close());
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(tmp_path_, ec);
  if (ec) return IoError(tmp_path_ + ": stat: " + ec.message());
  std::filesystem::rename(tmp_path_, final_path_, ec);
  if (ec) return IoError(final_path_ + ": rename from .tmp: " + ec.message());
  tar_.reset();

  ShardIndex index;
  index.shard_path = final_path_;
  index.shard_size = size;
  index.key_rule = key_rule_;
  STOKER_ASSIGN_OR_RETURN(std::vector<SampleEntry> samples, GroupSamples(members_, key_rule_, final_path_));
  index.samples = SampleTable(samples);
  STOKER_RETURN_IF_ERROR(WriteIndexAtomically(index));
  shard_paths_.push_back(final_path_);
  summaries_.push_back(SummaryOf(index));
  bytes_ += size;
  return Status::Ok();
}

Status ShardWriter::Finish() {
  if (!tar_) return Status::Ok();
  return CloseShard();
}

}  // namespace stoker::cli
