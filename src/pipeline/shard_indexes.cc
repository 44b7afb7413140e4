// pipeline/shard_indexes.cc — see shard_indexes.h.
#include "pipeline/shard_indexes.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/cpu_share.h"
#include "formats/parquet_file.h"
#include "io/reader.h"
#include "pipeline/image_folder.h"

namespace stoker {

Status ForEachShardIndex(const std::vector<std::string>& shards, KeyRule rule, const IoOptions& io,
                         const std::function<void(size_t, ShardIndex&&)>& take) {
  const bool remote = std::any_of(shards.begin(), shards.end(), [](const std::string& s) { return IsRemoteUrl(s); });
  const size_t cores = static_cast<size_t>(CurrentCpuShare().cores);  // the job's CPUs, not the machine's
  const int threads = static_cast<int>(std::min<size_t>(shards.size(), remote ? kParallelIndexLoads : cores));
  std::vector<std::optional<Status>> results(shards.size());
  std::mutex take_mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  // Each worker claims the next shard and loads every shard it claims; after
  // a failure no more are claimed. Claims go in shard order, so every shard
  // below a claimed one was claimed too: the lowest failing shard is loaded.
  auto work = [&] {
    while (!failed.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= shards.size()) break;
      Result<ShardIndex> index =
          IsParquetPath(shards[i]) ? LoadParquetIndex(shards[i], io) : LoadOrBuildShardIndex(shards[i], rule, io);
      results[i] = index.status();
      if (!index.ok()) {
        failed = true;
        continue;
      }
      std::lock_guard lock(take_mu);
      take(i, std::move(index.value()));
    }
  };
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
  }
  for (std::optional<Status>& r : results)
    if (r && !r->ok()) return *r;  // the lowest failing shard (unclaimed ones lie above it)
#if defined(__GLIBC__)
  // A scan's scratch (the tar's members, its samples before they are packed
  // into the table: ~5 MB for 10,000 samples) is freed, but its pages stay
  // with the arena of the thread that scanned: ~10 MB of RSS over 20 shards
  // or more, held for the loader's life. Give them back.
  malloc_trim(0);
#endif
  return Status::Ok();
}

Result<std::vector<ShardIndex>> LoadShardIndexes(const std::vector<std::string>& shards, KeyRule rule,
                                                 const IoOptions& io) {
  std::vector<ShardIndex> out(shards.size());
  STOKER_RETURN_IF_ERROR(ForEachShardIndex(shards, rule, io, [&](size_t i, ShardIndex&& index) {
    out[i] = std::move(index);
  }));
  return out;
}

std::vector<ShardSummary> SummariesOf(const std::vector<ShardIndex>& indexes) {
  std::vector<ShardSummary> out;
  for (const ShardIndex& index : indexes) out.push_back(SummaryOf(index));
  return out;
}

Result<ShardTables> SummarizeShards(const LoaderOptions& options, const IoOptions& io, uint64_t keep_bytes,
                                    std::vector<std::string>* shards) {
  ShardTables t;
  const std::vector<std::string>& sources = options.sources;
  if (IsImageFolderSource(sources)) {  // a directory of class sub-directories
    std::vector<ShardIndex> indexes;
    STOKER_RETURN_IF_ERROR(ImageFolderShards(sources[0], shards, &indexes));
    t.all_held = true;
    t.from = "the image folder's listing";
    for (uint32_t i = 0; i < indexes.size(); ++i) {
      t.summaries.push_back(SummaryOf(indexes[i]));
      t.bytes += indexes[i].samples.MemoryBytes();
      t.held.emplace_back(i, std::move(indexes[i]));
    }
    return t;
  }
  const auto manifest = std::find_if(sources.begin(), sources.end(), IsManifestPath);
  if (manifest != sources.end()) {
    if (sources.size() > 1) {
      return InvalidArgument("a dataset manifest (" + *manifest + ") is the loader's only source; " +
                             std::to_string(sources.size() - 1) + " more were given");
    }
    STOKER_ASSIGN_OR_RETURN(DatasetManifest m, ReadManifest(*manifest, io));
    if (m.key_rule != options.key_rule) {
      return InvalidArgument(*manifest + " counts samples by another key rule than this loader's key_rule; index "
                             "the shards again with the loader's rule, or give the loader the manifest's");
    }
    for (ShardSummary& s : m.shards) {
      t.bytes += kIndexBytesPerSample * s.samples;
      shards->push_back(s.path);
    }
    t.summaries = std::move(m.shards);
    t.from = "the manifest " + *manifest;
    return t;
  }
  STOKER_ASSIGN_OR_RETURN(*shards, ExpandSources(sources, io));
  t.summaries.resize(shards->size());
  uint64_t kept = 0;
  size_t parquet_files = 0, scanned = 0;
  STOKER_RETURN_IF_ERROR(ForEachShardIndex(*shards, options.key_rule, io, [&](size_t i, ShardIndex&& index) {
    t.summaries[i] = SummaryOf(index);
    scanned += index.scanned;
    t.remote_scanned += index.scanned && IsRemoteUrl(index.shard_path);
    const uint64_t bytes = index.samples.MemoryBytes();
    t.bytes += bytes;
    if (index.parquet) {
      ++parquet_files;
      t.row_group_bytes = std::max(t.row_group_bytes, ParquetMaxRowGroupBytes(index));
    }
    if (index.parquet || kept + bytes <= keep_bytes) {
      kept += bytes;
      t.held.emplace_back(static_cast<uint32_t>(i), std::move(index));
    }
  }));
  const size_t n = shards->size();
  const std::string headers = "the tar headers of " + std::to_string(scanned) + " shards" +
                              (t.remote_scanned ? " (" + std::to_string(t.remote_scanned) + " remote, read whole)" : "");
  t.from = parquet_files > 0 ? std::to_string(n) + " Parquet footers"
           : scanned == 0    ? std::to_string(n) + " index sidecars"
           : scanned == n    ? headers
                             : std::to_string(n - scanned) + " index sidecars and " + headers;
  if (parquet_files > 0) {
    t.parquet = true;
    if (parquet_files != shards->size()) {
      return InvalidArgument("sources mix Parquet files with tar shards; give one kind per loader");
    }
    t.all_held = true;
    std::vector<ShardIndex> indexes;
    for (auto& [i, index] : t.held) indexes.push_back(std::move(index));
    t.parquet_block = ParquetShuffleBlock(indexes);
    for (size_t k = 0; k < indexes.size(); ++k) t.held[k].second = std::move(indexes[k]);
  }
  return t;
}

Result<KeyRule> SourceKeyRule(const LoaderOptions& options, size_t source) {
  const std::vector<std::string>& rules = options.mix.key_rules;
  if (source >= rules.size() || rules[source].empty()) return options.key_rule;
  Result<KeyRule> rule = ParseKeyRule(rules[source]);
  if (!rule.ok()) return rule.status().WithContext("source '" + options.mix.names[source] + "' of the mixture");
  return rule;
}

std::vector<uint32_t> SourceFirstShards(const MixOptions& mix) {
  std::vector<uint32_t> first_shards;
  uint32_t first = 0;
  for (uint32_t n : mix.shards) {
    first_shards.push_back(first);
    first += n;
  }
  return first_shards;
}

uint32_t SourceOfShard(const std::vector<uint32_t>& first_shards, uint32_t shard) {
  const auto after = std::upper_bound(first_shards.begin(), first_shards.end(), shard);
  return after == first_shards.begin() ? 0 : static_cast<uint32_t>(after - first_shards.begin() - 1);
}

std::shared_ptr<const FieldAliases> SourceAliases(const LoaderOptions& options, size_t source) {
  const auto& members = options.mix.members;
  if (source >= members.size() || members[source].empty()) return nullptr;
  return std::make_shared<const FieldAliases>(members[source]);
}

Status CheckSourceAliases(const LoaderOptions& options, size_t source, const FieldAliases* aliases) {
  for (const auto& alias : aliases ? *aliases : FieldAliases{}) {
    const std::string& field = alias.first;
    const bool known = field == options.key_column ||
                       std::any_of(options.fields.begin(), options.fields.end(),
                                   [&field](const FieldSpec& f) { return f.field == field; });
    if (!known) {
      return InvalidArgument("source '" + options.mix.names[source] + "' reads field '" + field + "' from member '" +
                             alias.second + "', but the loader has no field '" + field + "'");
    }
  }
  return Status::Ok();
}

Result<ShardTables> SummarizeMixture(LoaderOptions& options, const IoOptions& io, uint64_t keep_bytes,
                                     std::vector<std::string>* shards) {
  MixOptions& mix = options.mix;
  if (mix.names.size() != options.sources.size()) {
    return InvalidArgument("a mixture names " + std::to_string(mix.names.size()) + " sources for " +
                           std::to_string(options.sources.size()) + " entries of sources");
  }
  ShardTables t;
  mix.shards.clear();
  std::vector<std::string> froms;
  for (size_t s = 0; s < options.sources.size(); ++s) {
    LoaderOptions one = options;
    one.sources = {options.sources[s]};
    one.mix = MixOptions{};
    STOKER_ASSIGN_OR_RETURN(one.key_rule, SourceKeyRule(options, s));
    const std::shared_ptr<const FieldAliases> aliases = SourceAliases(options, s);
    STOKER_RETURN_IF_ERROR(CheckSourceAliases(options, s, aliases.get()));
    // The source's own names, as it is summarized alone (Parquet checks its columns).
    for (FieldSpec& f : one.fields) f.field = std::string(AliasedField(aliases.get(), f.field));
    if (!one.key_column.empty()) one.key_column = std::string(AliasedField(aliases.get(), one.key_column));
    std::vector<std::string> part;
    const uint64_t kept = std::min<uint64_t>(keep_bytes, keep_bytes - std::min(keep_bytes, t.bytes));
    Result<ShardTables> r = SummarizeShards(one, io, kept, &part);
    if (!r.ok()) return r.status().WithContext("source '" + mix.names[s] + "' of the mixture");
    ShardTables& p = r.value();
    const uint32_t base = static_cast<uint32_t>(shards->size());
    for (auto& [i, index] : p.held) {
      index.samples.SetAliases(aliases);
      t.held.emplace_back(base + i, std::move(index));
    }
    t.summaries.insert(t.summaries.end(), p.summaries.begin(), p.summaries.end());
    t.bytes += p.bytes;
    t.all_held = t.all_held || p.all_held;
    t.row_group_bytes = std::max(t.row_group_bytes, p.row_group_bytes);
    if (p.parquet) t.parquet_block = t.parquet ? std::min(t.parquet_block, p.parquet_block) : p.parquet_block;
    t.parquet = t.parquet || p.parquet;
    t.source_parquet_blocks.push_back(p.parquet ? p.parquet_block : 0);
    t.remote_scanned += p.remote_scanned;
    froms.push_back(mix.names[s] + ": " + p.from);
    mix.shards.push_back(static_cast<uint32_t>(part.size()));
    shards->insert(shards->end(), part.begin(), part.end());
  }
  for (size_t s = 0; s < froms.size(); ++s) t.from += (s ? "; " : "") + froms[s];
  return t;
}

}  // namespace stoker
