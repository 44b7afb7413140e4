// cli/pack.cc — `stoker pack SRC_DIR OUT_PREFIX`: loose files to tar shards.
//
// Two source layouts:
//  * sa1b (flat): "{id}.jpg", "{id}_features.npz", "{id}.json" ... -> one
//    sample per id; members keep their names (readers group them with the
//    underscore key rule) or, with --rename-wds, become "{id}.features.npz" so
//    any WebDataset reader sees the fields.
//  * classes: DIR/<class>/<stem>.JPEG -> sample "<class>/<stem>":
//    "<class>/<stem>.jpg" (the file's bytes) and "<class>/<stem>.cls" (the
//    class's index, classes sorted by name). The key is the file's path
//    relative to DIR up to the first dot of its name: the key the loader
//    gives the same file read as an image folder (pipeline/image_folder.h),
//    so a packed folder and the folder name their samples alike. The class
//    names go beside the shards as OUT_PREFIX.classes.json (a JSON list, name
//    i for label i), where a loader over the shards reads them back as its
//    `classes`, as it lists an image folder's (issue 44).
// Samples go in natural name order, or a seeded shuffle. Each shard gets its
// sidecar index, and the output folder its dataset manifest
// (stoker-manifest.json, from the writer's own counts, other prefixes' shards
// there kept: cli/manifest_output.h).
// Hidden names (".*") are skipped, so temporary files are too.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "cli/shard_writer.h"
#include "core/file.h"
#include "formats/text_check.h"

#include <nlohmann/json.hpp>

namespace stoker::cli {
namespace fs = std::filesystem;
namespace {

// Beside the shards: the class names of a class-folder tree, read back by
// python/stoker/loader.py (Loader.classes).
constexpr char kClassesSuffix[] = ".classes.json";

struct SourceMember {
  std::string name;         // member name in the shard
  std::string path;         // read from here, or
  std::string inline_data;  // (when path is empty) written as is
  uint64_t size = 0;
};
struct SourceSample {
  std::string key;
  std::vector<SourceMember> members;
};

// Up to the first dot of the basename: the WebDataset key.
std::string StemOf(const std::string& name) { return name.substr(0, name.find('.')); }

Status ListDir(const fs::path& dir, std::vector<fs::directory_entry>* files,
               std::vector<fs::directory_entry>* dirs) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return IoError(dir.string() + ": cannot list: " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (it->is_directory(ec)) {
      if (dirs) dirs->push_back(*it);
    } else if (it->is_regular_file(ec)) {
      files->push_back(*it);
    } else {
      // A broken link or a device in a dataset folder is a mistake to report,
      // not a file to leave out silently.
      return IoError(it->path().string() + ": not a readable regular file or folder");
    }
  }
  auto by_name = [](const fs::directory_entry& a, const fs::directory_entry& b) {
    return NaturalLess(a.path().filename().string(), b.path().filename().string());
  };
  std::sort(files->begin(), files->end(), by_name);
  if (dirs) std::sort(dirs->begin(), dirs->end(), by_name);
  return Status::Ok();
}

Result<uint64_t> SizeOf(const fs::directory_entry& entry) {
  std::error_code ec;
  uint64_t size = entry.file_size(ec);
  if (ec) return IoError(entry.path().string() + ": stat: " + ec.message());
  return size;
}

Result<std::vector<SourceSample>> ListSa1b(const std::vector<fs::directory_entry>& files, bool rename_wds) {
  std::set<std::string> keys;
  for (const auto& f : files) keys.insert(StemOf(f.path().filename().string()));
  // A key that is another key plus "_suffix" belongs to that one (the longest
  // such prefix, followed to its root): the underscore key rule of the loader.
  auto root_of = [&](std::string key) {
    for (size_t pos = key.rfind('_'); pos != std::string::npos && pos > 0; pos = key.rfind('_', pos - 1)) {
      if (keys.count(key.substr(0, pos))) {
        key = key.substr(0, pos);
        pos = key.size();
      }
    }
    return key;
  };
  std::map<std::string, SourceSample> by_key;
  for (const auto& f : files) {
    const std::string name = f.path().filename().string();
    const std::string root = root_of(StemOf(name));
    SourceMember m{name, f.path().string(), {}, 0};
    STOKER_ASSIGN_OR_RETURN(m.size, SizeOf(f));
    if (rename_wds && StemOf(name) != root) m.name = root + "." + name.substr(root.size() + 1);
    by_key[root].key = root;
    by_key[root].members.push_back(std::move(m));
  }
  std::vector<SourceSample> samples;
  for (auto& [key, sample] : by_key) {
    // The id's own members first ("sa_1.jpg"), then the suffixed ones, so the
    // sample's first member carries its key whatever reader groups them.
    // Decided on the file names, so --rename-wds keeps the same order.
    std::sort(sample.members.begin(), sample.members.end(), [&](const auto& a, const auto& b) {
      const std::string fa = fs::path(a.path).filename().string(), fb = fs::path(b.path).filename().string();
      const bool a_own = StemOf(fa) == key, b_own = StemOf(fb) == key;
      return a_own != b_own ? a_own : fa < fb;
    });
    samples.push_back(std::move(sample));
  }
  std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return NaturalLess(a.key, b.key); });
  return samples;
}

Result<std::vector<SourceSample>> ListClasses(const std::vector<fs::directory_entry>& class_dirs) {
  std::vector<SourceSample> samples;
  std::map<std::string, std::string> seen;  // key -> path, to refuse two files with one key
  for (size_t cls = 0; cls < class_dirs.size(); ++cls) {
    std::vector<fs::directory_entry> files;
    STOKER_RETURN_IF_ERROR(ListDir(class_dirs[cls].path(), &files, nullptr));
    for (const auto& f : files) {
      const std::string name = f.path().filename().string();
      const std::string key = class_dirs[cls].path().filename().string() + "/" + StemOf(name);
      auto [it, fresh] = seen.emplace(key, f.path().string());
      if (!fresh) {
        return InvalidArgument("two files give the sample key '" + key + "': " + it->second + " and " +
                               f.path().string());
      }
      std::string ext = name.find('.') == std::string::npos ? "bin" : name.substr(name.find('.') + 1);
      for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (ext == "jpeg") ext = "jpg";
      SourceSample sample{key, {}};
      SourceMember image{key + "." + ext, f.path().string(), {}, 0};
      STOKER_ASSIGN_OR_RETURN(image.size, SizeOf(f));
      sample.members.push_back(std::move(image));
      std::string label = std::to_string(cls);
      sample.members.push_back({key + ".cls", {}, label, label.size()});
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

// OUT_PREFIX.classes.json: the class names by label, so the shards keep what
// the folder's sub-directory names said. A run of another layout removes
// the file an earlier run of the prefix left, so no stale names are read.
Status WriteClasses(const std::string& out_prefix, const std::vector<fs::directory_entry>* class_dirs) {
  const std::string path = out_prefix + kClassesSuffix;
  if (class_dirs == nullptr) {
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) return IoError(path + ": cannot remove the classes of an earlier run: " + ec.message());
    return Status::Ok();
  }
  nlohmann::json names = nlohmann::json::array();
  for (const auto& d : *class_dirs) {
    const std::string name = d.path().filename().string();
    // A JSON string holds only UTF-8.
    if (Status utf8 = CheckUtf8({reinterpret_cast<const uint8_t*>(name.data()), name.size()}); !utf8.ok()) {
      return InvalidArgument(d.path().string() + ": the class name is not UTF-8 and cannot be stored in " + path);
    }
    names.push_back(name);
  }
  const std::string text = names.dump() + "\n";
  return WriteWholeFile(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

}  // namespace

Status RunPack(const PackOptions& opt) {
  std::vector<fs::directory_entry> files, dirs;
  STOKER_RETURN_IF_ERROR(ListDir(opt.src_dir, &files, &dirs));
  std::string layout = opt.layout;
  if (layout == "auto") {
    if (!files.empty() && !dirs.empty()) {
      return InvalidArgument(opt.src_dir + " holds both files and folders; pass --layout sa1b or classes");
    }
    layout = dirs.empty() ? "sa1b" : "classes";
  }
  std::vector<SourceSample> samples;
  if (layout == "sa1b") {
    STOKER_ASSIGN_OR_RETURN(samples, ListSa1b(files, opt.rename_wds));
  } else if (layout == "classes") {
    // Labels in torchvision ImageFolder's order, as an image folder read by
    // the loader gives them: class names sorted by byte (c10 before c2), not
    // in the natural order the samples take.
    std::sort(dirs.begin(), dirs.end(), [](const fs::directory_entry& a, const fs::directory_entry& b) {
      return a.path().filename().string() < b.path().filename().string();
    });
    STOKER_ASSIGN_OR_RETURN(samples, ListClasses(dirs));
  } else {
    return InvalidArgument("unknown layout '" + layout + "': use auto, sa1b or classes");
  }
  if (samples.empty()) return NotFound(opt.src_dir + ": no files to pack");
  if (opt.shuffle_seed) {
    Rng rng(*opt.shuffle_seed);
    for (size_t i = samples.size() - 1; i > 0; --i) std::swap(samples[i], samples[rng.Next() % (i + 1)]);
  }

  const fs::path parent = fs::path(opt.out_prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return IoError("cannot create output directory " + parent.string() + ": " + ec.message());
  }

  uint64_t total_files = 0, total_bytes = 0;
  for (const auto& s : samples) {
    for (const auto& m : s.members) {
      total_files += !m.path.empty();
      total_bytes += m.size;
    }
  }
  const KeyRule rule = layout == "sa1b" && !opt.rename_wds ? KeyRule::kUnderscoreSuffix : KeyRule::kWebDataset;
  ShardWriter writer(opt.out_prefix, opt.shard_bytes, rule);
  Progress progress("pack", total_files, total_bytes, opt.quiet);
  std::vector<std::string> buffers;
  std::vector<PackMember> members;
  for (const SourceSample& sample : samples) {
    buffers.clear();
    members.clear();
    buffers.reserve(sample.members.size());
    uint64_t files_read = 0, bytes_read = 0;
    for (const SourceMember& m : sample.members) {
      if (m.path.empty()) {
        buffers.push_back(m.inline_data);
      } else {
        STOKER_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(m.path));
        buffers.push_back(std::move(data));
        ++files_read;
      }
      bytes_read += buffers.back().size();
      members.push_back({m.name, {reinterpret_cast<const uint8_t*>(buffers.back().data()), buffers.back().size()}});
    }
    STOKER_RETURN_IF_ERROR(writer.AddSample(members));
    progress.Add(files_read, bytes_read);
  }
  STOKER_RETURN_IF_ERROR(writer.Finish());
  progress.Finish();
  STOKER_RETURN_IF_ERROR(WriteClasses(opt.out_prefix, layout == "classes" ? &dirs : nullptr));
  // A glob over the prefix would mix in shards of an earlier, larger run.
  char next[32];
  std::snprintf(next, sizeof(next), "-%06zu.tar", writer.shard_paths().size());
  if (std::error_code ec; fs::exists(opt.out_prefix + next, ec)) {
    std::fprintf(stderr, "stoker pack: warning: %s%s is left from an earlier run; remove it before globbing %s-*.tar\n",
                 opt.out_prefix.c_str(), next, opt.out_prefix.c_str());
  }

  if (!opt.quiet) {
    const auto& paths = writer.shard_paths();
    std::printf("packed %llu samples (%llu files, %s) into %zu shard%s, %s, key rule %s: %s%s%s\n",
                (unsigned long long)writer.samples(), (unsigned long long)total_files,
                FormatBytes(double(total_bytes)).c_str(), paths.size(), paths.size() == 1 ? "" : "s",
                FormatBytes(double(writer.bytes())).c_str(), KeyRuleName(rule), paths.front().c_str(),
                paths.size() > 1 ? " .. " : "", paths.size() > 1 ? paths.back().c_str() : "");
  }
  DatasetManifest manifest;
  manifest.key_rule = rule;
  manifest.shards = writer.summaries();
  // The folder's manifest, updated: this prefix's shards are this run's.
  const ManifestPlace place{(parent / kManifestName).string(), "", opt.out_prefix};
  return WriteManifestOutput(manifest, opt.manifest, place, "pack", opt.quiet);
}

void RegisterPack(CLI::App& app, Status* status) {
  auto opt = std::make_shared<PackOptions>();
  auto shard_size = std::make_shared<std::string>("256MB");
  auto seed = std::make_shared<int64_t>(-1);
  CLI::App* cmd = app.add_subcommand("pack", "Pack loose files (SA-1B style or class folders) into tar shards");
  cmd->add_option("SRC_DIR", opt->src_dir, "folder of loose files")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("OUT_PREFIX", opt->out_prefix, "shards are written as OUT_PREFIX-000000.tar, ...")->required();
  cmd->add_option("--shard-size", *shard_size, "target shard size (e.g. 256MB, 1GiB)")->capture_default_str();
  cmd->add_option("--layout", opt->layout, "source layout")->capture_default_str()->check(CLI::IsMember({"auto", "sa1b", "classes"}));
  cmd->add_option("--shuffle-seed", *seed, "shuffle samples with this seed (default: natural name order)");
  cmd->add_flag("--rename-wds", opt->rename_wds,
                "sa1b: name members {id}.features.npz instead of {id}_features.npz (plain WebDataset fields)");
  cmd->add_flag("-q,--quiet", opt->quiet, "no progress and no summary");
  AddManifestFlags(cmd, &opt->manifest);
  cmd->callback([=] {
    auto bytes = ParseByteSize(*shard_size);
    if (!bytes.ok()) {
      *status = bytes.status().WithContext("--shard-size");
      return;
    }
    opt->shard_bytes = *bytes;
    if (*seed >= 0) opt->shuffle_seed = static_cast<uint64_t>(*seed);
    *status = RunPack(*opt);
  });
}

}  // namespace stoker::cli
