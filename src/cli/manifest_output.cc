// cli/manifest_output.cc — see manifest_output.h.
#include "cli/manifest_output.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <unordered_set>

#include "cli/common.h"
#include "io/reader.h"

namespace stoker::cli {
namespace fs = std::filesystem;
namespace {

std::string Normal(const std::string& path) {
  if (IsRemoteUrl(path)) return path;
  std::error_code ec;
  return fs::absolute(fs::path(path), ec).lexically_normal().string();
}

// "<prefix>-000012.tar": a shard pack numbers under this prefix (not "<prefix>-hard-000000.tar").
bool IsNumbered(const std::string& path, const std::string& prefix_dash) {
  if (!path.starts_with(prefix_dash) || !path.ends_with(".tar")) return false;
  const std::string_view number(path.data() + prefix_dash.size(), path.size() - prefix_dash.size() - 4);
  return !number.empty() && number.find_first_not_of("0123456789") == std::string_view::npos;
}

// The entries of the manifest at `path` to keep beside this run's (see the
// header): none when there is no manifest there, or an unreadable one.
std::vector<ShardSummary> EntriesToKeep(const DatasetManifest& manifest, const ManifestPlace& place,
                                        const char* command, bool quiet, KeyRule* their_rule) {
  std::error_code ec;
  if (!fs::exists(place.default_path, ec)) return {};
  Result<DatasetManifest> old = ReadManifest(place.default_path);
  if (!old.ok()) {
    if (!quiet) std::fprintf(stderr, "stoker %s: replacing %s\n", command, old.status().ToString().c_str());
    return {};
  }
  *their_rule = old->key_rule;
  std::unordered_set<std::string> ours;
  for (const ShardSummary& s : manifest.shards) ours.insert(Normal(s.path));
  const std::string owned = place.owned_prefix.empty() ? "" : Normal(place.owned_prefix) + "-";
  std::vector<ShardSummary> keep;
  for (ShardSummary& s : old->shards) {
    const std::string n = Normal(s.path);
    if (ours.contains(n) || (!owned.empty() && IsNumbered(n, owned))) continue;
    const bool there = IsRemoteUrl(s.path) || fs::exists(place.by_sidecar ? IndexPathFor(s.path) : s.path, ec);
    if (!there) continue;  // dropped with its shard
    keep.push_back(std::move(s));
  }
  return keep;
}

}  // namespace

void AddManifestFlags(CLI::App* cmd, ManifestFlags* flags) {
  CLI::Option* path = cmd->add_option(
      "--manifest", flags->path,
      std::string("write the dataset manifest here, listing exactly these shards (default: ") + kManifestName +
          " in the shards' folder, updated)");
  CLI::Option* skip = cmd->add_flag("--no-manifest", flags->skip, "write no dataset manifest");
  path->excludes(skip);
}

Status WriteManifestOutput(const DatasetManifest& manifest, const ManifestFlags& flags, const ManifestPlace& place,
                           const char* command, bool quiet) {
  if (flags.skip || manifest.shards.empty()) return Status::Ok();
  if (!flags.path.empty()) {
    STOKER_RETURN_IF_ERROR(WriteManifest(manifest, flags.path).WithContext("dataset manifest"));
    if (!quiet) {
      std::printf("%s: %zu shard%s, %llu samples, key rule %s\n", flags.path.c_str(), manifest.shards.size(),
                  manifest.shards.size() == 1 ? "" : "s", (unsigned long long)TotalSamples(manifest),
                  KeyRuleName(manifest.key_rule));
    }
    return Status::Ok();
  }
  if (place.default_path.empty()) {
    if (!quiet) std::fprintf(stderr, "stoker %s: no dataset manifest written: %s\n", command, place.why_none.c_str());
    return Status::Ok();
  }
  KeyRule their_rule = manifest.key_rule;
  std::vector<ShardSummary> kept = EntriesToKeep(manifest, place, command, quiet, &their_rule);
  if (!kept.empty() && their_rule != manifest.key_rule) {
    std::fprintf(stderr,
                 "stoker %s: warning: %s is left as it was: it lists %zu other shard%s (%s%s) grouped under key rule "
                 "%s, and these group under %s; pass --key-rule, --manifest PATH or --no-manifest\n",
                 command, place.default_path.c_str(), kept.size(), kept.size() == 1 ? "" : "s",
                 kept.front().path.c_str(), kept.size() > 1 ? ", ..." : "", KeyRuleName(their_rule),
                 KeyRuleName(manifest.key_rule));
    return Status::Ok();
  }
  DatasetManifest merged;
  merged.key_rule = manifest.key_rule;
  merged.shards = manifest.shards;
  if (!kept.empty()) {
    merged.shards.insert(merged.shards.end(), std::make_move_iterator(kept.begin()),
                         std::make_move_iterator(kept.end()));
    std::vector<std::pair<std::string, size_t>> order;  // natural order of the normalized paths
    order.reserve(merged.shards.size());
    for (size_t i = 0; i < merged.shards.size(); ++i) order.emplace_back(Normal(merged.shards[i].path), i);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return NaturalLess(a.first, b.first); });
    std::vector<ShardSummary> sorted;
    sorted.reserve(order.size());
    for (const auto& [_, i] : order) sorted.push_back(std::move(merged.shards[i]));
    merged.shards = std::move(sorted);
  }
  STOKER_RETURN_IF_ERROR(WriteManifest(merged, place.default_path).WithContext("dataset manifest"));
  if (!quiet) {
    std::printf("%s: %zu shard%s%s, %llu samples, key rule %s\n", place.default_path.c_str(), merged.shards.size(),
                merged.shards.size() == 1 ? "" : "s",
                kept.empty() ? "" : (" (" + std::to_string(kept.size()) + " kept from before)").c_str(),
                (unsigned long long)TotalSamples(merged), KeyRuleName(merged.key_rule));
  }
  return Status::Ok();
}

}  // namespace stoker::cli
