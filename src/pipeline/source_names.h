// pipeline/source_names.h — a mixture's sources by shard (MixOptions): the
// source of each sample a batch names by its url (`__source__`), and an error
// told with the source of the shard it names. Both loaders' (indexed and
// stream); for one dataset, empty and a no-op.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "stoker/loader.h"

namespace stoker {

class MixSourceNames {
 public:
  MixSourceNames() = default;
  // shards: the sources' shards, source after source, mix.shards of each.
  MixSourceNames(const std::vector<std::string>& shards, const MixOptions& mix);

  // The source name of each url (a shard as expanded); "" for one not
  // known; empty for one dataset.
  std::vector<std::string> Of(const std::vector<std::string>& urls) const;
  // `st` with the source of the shard its message names (a message names
  // its shard as expanded), so a bad member or a failed read is told with
  // its source; unchanged where none is named.
  Status Name(const Status& st) const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> source_of_url_;
};

}  // namespace stoker
