// cli/index.cc — `stoker index SHARD...`: writes each shard's "<shard>.idx"
// sidecar (the loader's random-access index) from a scan of its tar headers.
// The default key rule "auto" picks underscore for SA-1B style shards
// ("sa_1.jpg" + "sa_1_features.npz") and webdataset otherwise.
// A URL shard (http://, https://, s3://) is scanned through io/reader.h; its
// sidecar cannot be written beside it, so --out-dir names a local directory
// (upload the .idx files next to the shards).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "formats/sample_index.h"
#include "formats/tar.h"
#include "io/reader.h"
#include "io/url.h"

namespace stoker::cli {
namespace {

Status IndexShard(const std::string& path, const std::string& rule_name, const std::string& out_dir, bool quiet) {
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
                      : (std::filesystem::path(out_dir) /  // a URL's query is not part of the file's name
                         std::filesystem::path(SplitQuery(IndexPathFor(path)).path).filename())
                            .string();
  STOKER_RETURN_IF_ERROR(WriteIndexAtomically(index, target));
  if (!quiet) {
    std::printf("%s: %zu samples, key rule %s\n", target.c_str(), index.samples.size(), KeyRuleName(index.key_rule));
  }
  return Status::Ok();
}

}  // namespace

void RegisterIndex(CLI::App& app, Status* status) {
  auto shards = std::make_shared<std::vector<std::string>>();
  auto rule = std::make_shared<std::string>("auto");
  auto quiet = std::make_shared<bool>(false);
  auto out_dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("index", "Write the <shard>.idx sidecar index of tar shards");
  cmd->add_option("SHARD", *shards, "tar shards")->required();
  cmd->add_option("--key-rule", *rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_flag("-q,--quiet", *quiet, "print nothing on success");
  cmd->add_option("-o,--out-dir", *out_dir, "write the sidecars here (required for URL shards)");
  cmd->callback([=] {
    for (const std::string& shard : *shards) {
      *status = IndexShard(shard, *rule, *out_dir, *quiet);
      if (!status->ok()) return;
    }
  });
}

}  // namespace stoker::cli
