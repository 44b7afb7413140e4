// pipeline/source_names.cc — see source_names.h.
#include "pipeline/source_names.h"

namespace stoker {

MixSourceNames::MixSourceNames(const std::vector<std::string>& shards, const MixOptions& mix) : names_(mix.names) {
  for (size_t s = 0, shard = 0; s < mix.shards.size(); ++s) {
    for (uint32_t i = 0; i < mix.shards[s] && shard < shards.size(); ++i, ++shard) {
      source_of_url_.emplace(shards[shard], static_cast<uint32_t>(s));
    }
  }
}

std::vector<std::string> MixSourceNames::Of(const std::vector<std::string>& urls) const {
  std::vector<std::string> out;
  if (source_of_url_.empty()) return out;
  out.reserve(urls.size());
  for (const std::string& u : urls) {
    const auto it = source_of_url_.find(u);
    out.push_back(it == source_of_url_.end() ? std::string() : names_[it->second]);
  }
  return out;
}

Status MixSourceNames::Name(const Status& st) const {
  if (st.ok()) return st;
  for (const auto& [url, s] : source_of_url_) {
    if (st.message().find(url) != std::string::npos) return st.WithContext("source '" + names_[s] + "' of the mixture");
  }
  return st;
}

}  // namespace stoker
