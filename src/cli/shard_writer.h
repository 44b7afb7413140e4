// cli/shard_writer.h — writes samples into a numbered series of tar shards
// (PREFIX-000000.tar, ...) of about a target size, each with its sidecar index.
//
// A shard is written as "<name>.tmp" and renamed when complete, so a failure
// (disk full, killed process) never leaves a half-written shard under a final
// name; an unfinished .tmp is removed when the writer is destroyed. The index
// is computed from the writer's own offsets, not by re-reading the shard, and
// so is each finished shard's summary for the dataset manifest.
// Thread-safety: single-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formats/dataset_manifest.h"
#include "formats/sample_index.h"
#include "formats/tar.h"
#include "stoker/status.h"

namespace stoker::cli {

struct PackMember {
  std::string name;                 // member name in the tar
  std::span<const uint8_t> data;
};

class ShardWriter {
 public:
  ShardWriter(std::string prefix, uint64_t target_bytes, KeyRule key_rule)
      : prefix_(std::move(prefix)), target_bytes_(target_bytes), key_rule_(key_rule) {}
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Adds one sample's members, adjacent, starting a new shard first when this
  // sample would push a non-empty shard past the target size.
  Status AddSample(const std::vector<PackMember>& members);
  // Closes and indexes the last shard.
  Status Finish();

  const std::vector<std::string>& shard_paths() const { return shard_paths_; }
  const std::vector<ShardSummary>& summaries() const { return summaries_; }  // of finished shards
  uint64_t samples() const { return samples_; }
  uint64_t bytes() const { return bytes_; }  // of finished shards

 private:
  Status OpenShard();
  Status CloseShard();

  const std::string prefix_;
  const uint64_t target_bytes_;
  const KeyRule key_rule_;
  std::optional<TarWriter> tar_;        // the open shard, under tmp_path_
  std::string final_path_, tmp_path_;
  std::vector<TarMember> members_;      // of the open shard
  uint64_t shard_samples_ = 0;
  std::vector<std::string> shard_paths_;
  std::vector<ShardSummary> summaries_;
  uint64_t samples_ = 0, bytes_ = 0;
};

}  // namespace stoker::cli
