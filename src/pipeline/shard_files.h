// pipeline/shard_files.h — the loader's open shards.
// Thread-safety: Get from any thread; the returned File serves concurrent preads.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/file.h"

namespace stoker {

// Shards are opened on first read and stay open: one descriptor per shard.
class ShardFiles {
 public:
  explicit ShardFiles(const std::vector<std::string>* paths) : paths_(paths), files_(paths->size()) {}
  Result<const File*> Get(uint32_t shard) {
    std::lock_guard lock(mu_);
    if (!files_[shard]) {
      STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead((*paths_)[shard]));
      files_[shard] = std::make_unique<File>(std::move(f));
    }
    return files_[shard].get();
  }

 private:
  const std::vector<std::string>* paths_;
  std::mutex mu_;
  std::vector<std::unique_ptr<File>> files_;  // guarded by mu_
};

}  // namespace stoker
