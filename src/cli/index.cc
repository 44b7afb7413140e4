// cli/index.cc — `stoker index SHARD|DIR...`: writes each shard's
// "<shard>.idx" sidecar (the loader's random-access index) from a scan of its
// tar headers, and the dataset manifest (formats/dataset_manifest.h) from
// those indexes: the shards' sizes and sample counts in one small file.
// A folder stands for its tar shards (*.tar, *.tar.gz, *.tgz, *.tar.zst), in
// natural name order.
// The default key rule "auto" picks underscore for SA-1B style shards
// ("sa_1.jpg" + "sa_1_features.npz") and webdataset otherwise.
// A URL shard (http://, https://, s3://) is scanned through io/reader.h; its
// sidecar cannot be written beside it, so --out-dir names a local directory
// (upload the .idx files next to the shards). Its manifest goes there too,
// listing the shards by name, to be uploaded beside them with the sidecars: a
// URL's query (a presigned signature) is never written into it.
// Local shards are listed from the manifest's folder: by default
// stoker-manifest.json beside them when they share one folder, or in
// --out-dir when given, updated rather than replaced (cli/manifest_output.h).
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/manifest_output.h"
#include "formats/dataset_manifest.h"
#include "formats/sample_index.h"
#include "formats/tar.h"
#include "io/reader.h"
#include "io/url.h"

namespace stoker::cli {
namespace fs = std::filesystem;
namespace {

struct IndexOptions {
  std::vector<std::string> shards;
  std::string rule = "auto";
  bool quiet = false;
  std::string out_dir;
  ManifestFlags manifest;
};

Result<ShardIndex> IndexShard(const std::string& path, const std::string& rule_name, const std::string& out_dir,
                              bool quiet) {
  if (IsRemoteUrl(path) && out_dir.empty()) {
    return InvalidArgument(RedactUrl(path) + ": a URL's sidecar cannot be written beside it: pass --out-dir DIR, then upload "
                                  "DIR/*.idx next to the shards");
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> reader, OpenReader(path, DefaultIoOptions()));
  STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> members, ScanTar(*reader, reader->Size()));
  ShardIndex index;
  index.shard_path = path;
  STOKER_ASSIGN_OR_RETURN(std::vector<SampleEntry> samples, GroupWithRule(members, rule_name, path, &index.key_rule));
  index.samples = SampleTable(samples);
  index.shard_size = reader->Size();
  const std::string target =
      out_dir.empty() ? IndexPathFor(path)
                      : (fs::path(out_dir) /  // a URL's query is not part of the file's name
                         fs::path(SplitQuery(IndexPathFor(path)).path).filename())
                            .string();
  STOKER_RETURN_IF_ERROR(WriteIndexAtomically(index, target));
  if (!quiet) {
    std::printf("%s: %zu samples, key rule %s\n", target.c_str(), index.samples.size(), KeyRuleName(index.key_rule));
  }
  return index;
}

bool IsShardName(const std::string& name) {
  return name.ends_with(".tar") || name.ends_with(".tar.gz") || name.ends_with(".tgz") || name.ends_with(".tar.zst");
}

// The arguments with each local folder replaced by its shards.
Result<std::vector<std::string>> ExpandFolders(const std::vector<std::string>& args) {
  std::vector<std::string> shards;
  for (const std::string& arg : args) {
    std::error_code ec;
    if (IsRemoteUrl(arg) || !fs::is_directory(arg, ec)) {
      shards.push_back(arg);
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(arg, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(".") && IsShardName(name) && !it->is_directory(ec)) found.push_back(it->path().string());
    }
    if (ec) return IoError(arg + ": cannot list: " + ec.message());
    if (found.empty()) return NotFound(arg + ": a folder with no tar shard (*.tar, *.tar.gz, *.tgz, *.tar.zst)");
    std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) { return NaturalLess(a, b); });
    shards.insert(shards.end(), found.begin(), found.end());
  }
  return shards;
}

// A URL's folder: its path up to the last '/', the query left out.
std::string UrlFolder(const std::string& url) {
  const std::string path = SplitQuery(url).path;
  return path.substr(0, path.rfind('/') + 1);
}

// Where the manifest goes, and each shard's path as it is to be written
// (cli/manifest_output.h); or why there is no default place (`why`), or
// why no manifest can list these shards at all (an error).
Status PlanManifest(const IndexOptions& opt, std::vector<ShardSummary>* shards, std::string* path, std::string* why) {
  size_t urls = 0;
  for (const ShardSummary& s : *shards) urls += IsRemoteUrl(s.path);
  if (urls == 0) {
    if (!opt.out_dir.empty()) {
      *path = (fs::path(opt.out_dir) / kManifestName).string();
      return Status::Ok();
    }
    std::error_code ec;
    const fs::path folder = fs::absolute(shards->front().path, ec).lexically_normal().parent_path();
    for (const ShardSummary& s : *shards) {
      if (fs::absolute(s.path, ec).lexically_normal().parent_path() != folder) {
        *why = "the shards are in several folders (" + folder.string() + ", " + fs::path(s.path).parent_path().string() +
               "); pass --manifest PATH";
        return Status::Ok();
      }
    }
    *path = (fs::path(shards->front().path).parent_path() / kManifestName).string();  // as the user wrote it
    return Status::Ok();
  }
  // URLs are listed by name, for the manifest to be uploaded beside them.
  const std::string target = opt.manifest.path.empty() ? (fs::path(opt.out_dir) / kManifestName).string()
                                                       : opt.manifest.path;
  std::error_code ec;
  const fs::path folder = fs::absolute(target, ec).lexically_normal().parent_path();
  const std::string url_folder = UrlFolder(shards->front().path);
  for (ShardSummary& s : *shards) {
    if (!IsRemoteUrl(s.path) || UrlFolder(s.path) != url_folder) {
      const std::string reason = "URL shards are listed by name, to be uploaded beside the manifest, so they must all "
                                 "be URLs in one folder (" + RedactUrl(shards->front().path) + ", " +
                                 RedactUrl(s.path) + ")";
      if (!opt.manifest.path.empty()) return InvalidArgument("--manifest: " + reason);
      *why = reason;
      return Status::Ok();
    }
    s.path = (folder / fs::path(SplitQuery(s.path).path).filename()).string();
  }
  *path = target;
  return Status::Ok();
}

Status RunIndex(const IndexOptions& opt) {
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> shards, ExpandFolders(opt.shards));
  DatasetManifest manifest;
  std::string mixed;  // two shards that group under different rules
  for (const std::string& shard : shards) {
    STOKER_ASSIGN_OR_RETURN(ShardIndex index, IndexShard(shard, opt.rule, opt.out_dir, opt.quiet));
    if (manifest.shards.empty()) {
      manifest.key_rule = index.key_rule;
    } else if (index.key_rule != manifest.key_rule && mixed.empty()) {
      mixed = "its shards group under different key rules (" + RedactUrl(manifest.shards.front().path) + ": " +
              KeyRuleName(manifest.key_rule) + ", " + RedactUrl(shard) + ": " + KeyRuleName(index.key_rule) +
              ") and a manifest holds one; pass --key-rule";
    }
    manifest.shards.push_back(SummaryOf(index));  // the index itself goes: memory O(shards)
  }
  if (opt.manifest.skip) return Status::Ok();
  if (!mixed.empty()) {
    if (!opt.manifest.path.empty()) return InvalidArgument("--manifest: " + mixed);
    if (!opt.quiet) std::fprintf(stderr, "stoker index: no dataset manifest written: %s\n", mixed.c_str());
    return Status::Ok();
  }
  ManifestPlace place;
  place.by_sidecar = IsRemoteUrl(manifest.shards.front().path);  // before PlanManifest names them locally
  STOKER_RETURN_IF_ERROR(PlanManifest(opt, &manifest.shards, &place.default_path, &place.why_none));
  return WriteManifestOutput(manifest, opt.manifest, place, "index", opt.quiet);
}

}  // namespace

void RegisterIndex(CLI::App& app, Status* status) {
  auto opt = std::make_shared<IndexOptions>();
  CLI::App* cmd = app.add_subcommand(
      "index", std::string("Write the <shard>.idx sidecar index of tar shards, and the dataset manifest ") +
                   kManifestName + " (their sizes and sample counts)");
  cmd->add_option("SHARD", opt->shards, "tar shards, or folders of them")->required();
  cmd->add_option("--key-rule", opt->rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_flag("-q,--quiet", opt->quiet, "print nothing on success");
  cmd->add_option("-o,--out-dir", opt->out_dir,
                  "write the sidecars and the manifest here (required for URL shards: upload them beside the shards)");
  AddManifestFlags(cmd, &opt->manifest);
  cmd->callback([=] { *status = RunIndex(*opt); });
}

}  // namespace stoker::cli
