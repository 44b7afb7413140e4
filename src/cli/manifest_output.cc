// cli/manifest_output.cc — see manifest_output.h.
#include "cli/manifest_output.h"

#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "io/reader.h"

namespace stoker::cli {
namespace fs = std::filesystem;
namespace {

std::string Normal(const std::string& path) {
  if (IsRemoteUrl(path)) return path;
  std::error_code ec;
  return fs::absolute(fs::path(path), ec).lexically_normal().string();
}

// The shards an existing manifest at `path` lists beyond `manifest`'s that
// still exist (a local file there, or a URL): how many, and the first.
size_t OthersListed(const DatasetManifest& manifest, const std::string& path, std::string* first) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  Result<DatasetManifest> old = ReadManifest(path);
  if (!old.ok()) return 0;  // unreadable: nothing in it to keep
  std::unordered_set<std::string> ours;
  for (const ShardSummary& s : manifest.shards) ours.insert(Normal(s.path));
  size_t others = 0;
  for (const ShardSummary& s : old->shards) {
    if (ours.contains(Normal(s.path))) continue;
    if (!IsRemoteUrl(s.path) && !fs::exists(s.path, ec)) continue;  // gone: dropping it is right
    if (others++ == 0) *first = s.path;
  }
  return others;
}

}  // namespace

void AddManifestFlags(CLI::App* cmd, ManifestFlags* flags) {
  CLI::Option* path = cmd->add_option(
      "--manifest", flags->path,
      std::string("write the dataset manifest here (default: ") + kManifestName + " in the shards' folder)");
  CLI::Option* skip = cmd->add_flag("--no-manifest", flags->skip, "write no dataset manifest");
  path->excludes(skip);
}

Status WriteManifestOutput(const DatasetManifest& manifest, const ManifestFlags& flags,
                           const std::string& default_path, const std::string& no_default, const char* command,
                           bool quiet) {
  if (flags.skip || manifest.shards.empty()) return Status::Ok();
  std::string path = flags.path;
  if (path.empty()) {
    if (default_path.empty()) {
      if (!quiet) std::fprintf(stderr, "stoker %s: no dataset manifest written: %s\n", command, no_default.c_str());
      return Status::Ok();
    }
    std::string first;
    if (const size_t others = OthersListed(manifest, default_path, &first); others > 0) {
      std::fprintf(stderr,
                   "stoker %s: warning: %s is left as it is: it lists %zu other shard%s (%s%s) besides these; "
                   "index all the shards at once, or pass --manifest PATH or --no-manifest\n",
                   command, default_path.c_str(), others, others == 1 ? "" : "s", first.c_str(),
                   others > 1 ? ", ..." : "");
      return Status::Ok();
    }
    path = default_path;
  }
  STOKER_RETURN_IF_ERROR(WriteManifest(manifest, path).WithContext("dataset manifest"));
  if (!quiet) {
    std::printf("%s: %zu shard%s, %llu samples, key rule %s\n", path.c_str(), manifest.shards.size(),
                manifest.shards.size() == 1 ? "" : "s", (unsigned long long)TotalSamples(manifest),
                KeyRuleName(manifest.key_rule));
  }
  return Status::Ok();
}

}  // namespace stoker::cli
