// cli/index.cc — `stoker index SHARD...`: writes each shard's "<shard>.idx"
// sidecar (the loader's random-access index) from a scan of its tar headers.
// The default key rule "auto" picks underscore for SA-1B style shards
// ("sa_1.jpg" + "sa_1_features.npz") and webdataset otherwise.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "formats/sample_index.h"
#include "io/reader.h"
#include "formats/tar.h"

namespace stoker::cli {
namespace {

Status IndexShard(const std::string& path, const std::string& rule_name, bool quiet) {
  STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> members, ScanTar(path));
  ShardIndex index;
  index.shard_path = path;
  STOKER_ASSIGN_OR_RETURN(index.samples, GroupWithRule(members, rule_name, path, &index.key_rule));
  // The size the loader compares with: a .tar.gz's uncompressed size.
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> file, OpenReader(path));
  index.shard_size = file->Size();
  STOKER_RETURN_IF_ERROR(WriteIndexAtomically(index));
  if (!quiet) {
    std::printf("%s: %zu samples, key rule %s\n", IndexPathFor(path).c_str(), index.samples.size(),
                KeyRuleName(index.key_rule));
  }
  return Status::Ok();
}

}  // namespace

void RegisterIndex(CLI::App& app, Status* status) {
  auto shards = std::make_shared<std::vector<std::string>>();
  auto rule = std::make_shared<std::string>("auto");
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("index", "Write the <shard>.idx sidecar index of tar shards");
  cmd->add_option("SHARD", *shards, "tar shards")->required();
  cmd->add_option("--key-rule", *rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_flag("-q,--quiet", *quiet, "print nothing on success");
  cmd->callback([=] {
    for (const std::string& shard : *shards) {
      *status = IndexShard(shard, *rule, *quiet);
      if (!status->ok()) return;
    }
  });
}

}  // namespace stoker::cli
