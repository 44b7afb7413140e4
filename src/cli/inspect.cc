// cli/inspect.cc — `stoker inspect SHARD`: what a shard holds. Samples, the
// fields with their counts and sizes, and the first samples' members, as text
// or (--json) as one JSON object. It scans the tar itself rather than trusting
// a sidecar, so it is also the tool that says where a damaged shard breaks.
// Given a dataset manifest (*.json), it reads and checks that instead: its
// shards, samples and sizes, and the first shards' entries.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/infer_fields.h"
#include "formats/dataset_manifest.h"
#include "formats/parquet_file.h"
#include "formats/sample_index.h"
#include "formats/tar.h"
#include "pipeline/image_folder.h"

namespace stoker::cli {
namespace {

struct InspectOptions {
  std::string shard;
  int samples = 5;
  std::string key_rule = "auto";
  bool json = false;
};

struct FieldStats {
  uint64_t count = 0, total = 0;
};

// A tree of class sub-directories: its classes, files and sizes, in the
// order and with the labels the loader gives them (torchvision's ImageFolder).
Status InspectImageFolder(const InspectOptions& opt) {
  STOKER_ASSIGN_OR_RETURN(ImageFolderListing listing, ListImageFolder(opt.shard));
  std::vector<uint64_t> per_class(listing.classes.size()), class_bytes(listing.classes.size());
  std::map<std::string, FieldStats> by_ext;
  uint64_t total = 0;
  for (size_t i = 0; i < listing.files.size(); ++i) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(listing.files[i], ec);
    if (ec) return IoError(listing.files[i] + ": " + ec.message());
    std::string ext = std::filesystem::path(listing.files[i]).extension().string();
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    by_ext[ext].count++, by_ext[ext].total += size;
    per_class[listing.labels[i]]++, class_bytes[listing.labels[i]] += size;
    total += size;
  }
  const size_t shown = std::min(listing.files.size(), size_t(std::max(opt.samples, 0)));
  if (opt.json) {
    nlohmann::ordered_json out;
    out["image_folder"] = opt.shard;
    out["num_samples"] = listing.files.size();
    out["size_bytes"] = total;
    out["classes"] = nlohmann::ordered_json::array();
    for (size_t c = 0; c < listing.classes.size(); ++c) {
      out["classes"].push_back({{"name", listing.classes[c]}, {"label", c}, {"count", per_class[c]},
                                {"total_bytes", class_bytes[c]}});
    }
    out["extensions"] = nlohmann::ordered_json::object();
    for (const auto& [ext, st] : by_ext) out["extensions"][ext] = {{"count", st.count}, {"total_bytes", st.total}};
    out["samples"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < shown; ++i) out["samples"].push_back({{"path", listing.files[i]}, {"label", listing.labels[i]}});
    out["inferred_flags"] = {"-f", "image:image:224", "-f", "cls:scalar"};
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("folder    %s (%s in %zu files; an image folder: one sample per file)\n", opt.shard.c_str(),
              FormatBytes(double(total)).c_str(), listing.files.size());
  std::printf("classes   %zu (labels in sorted order, as torchvision's ImageFolder)\n", listing.classes.size());
  for (size_t c = 0; c < listing.classes.size() && c < 20; ++c) {
    std::printf("  %4zu %-24s %8llu files %12s\n", c, listing.classes[c].c_str(), (unsigned long long)per_class[c],
                FormatBytes(double(class_bytes[c])).c_str());
  }
  if (listing.classes.size() > 20) std::printf("  ... %zu more\n", listing.classes.size() - 20);
  for (const auto& [ext, st] : by_ext) {
    std::printf("%-9s %8llu files %12s total %12s mean\n", ext.c_str(), (unsigned long long)st.count,
                FormatBytes(double(st.total)).c_str(), FormatBytes(double(st.total) / st.count).c_str());
  }
  std::printf("inferred  -f image:image:224 -f cls:scalar\n");
  for (size_t i = 0; i < shown; ++i) std::printf("  %s  cls %d\n", listing.files[i].c_str(), listing.labels[i]);
  return Status::Ok();
}

// A Parquet file: its rows, row groups and columns, each with the field
// that reads it (formats/parquet_file.h), read from the footer alone.
Status InspectParquet(const InspectOptions& opt) {
  STOKER_ASSIGN_OR_RETURN(ShardIndex index, LoadParquetIndex(opt.shard, DefaultIoOptions()));
  STOKER_ASSIGN_OR_RETURN(ParquetSummary s, DescribeParquet(index));
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> flags, InferParquetFields(opt.shard));
  if (opt.json) {
    nlohmann::ordered_json out;
    out["parquet"] = opt.shard;
    out["size_bytes"] = index.shard_size;
    out["num_rows"] = s.rows;
    out["num_row_groups"] = s.row_groups;
    out["created_by"] = s.created_by;
    out["columns"] = nlohmann::ordered_json::array();
    for (const ParquetColumnInfo& c : s.columns) {
      out["columns"].push_back({{"name", c.name}, {"type", c.arrow_type}, {"field", c.suggested}});
    }
    out["inferred_flags"] = nlohmann::ordered_json::array();
    for (const std::string& f : flags) out["inferred_flags"].push_back("-f"), out["inferred_flags"].push_back(f);
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("parquet   %s (%s; written by %s)\nrows      %lld in %d row groups (one sample per row)\n",
              opt.shard.c_str(), FormatBytes(double(index.shard_size)).c_str(), s.created_by.c_str(),
              (long long)s.rows, s.row_groups);
  std::printf("%-20s %-44s %s\n", "column", "type", "field");
  for (const ParquetColumnInfo& c : s.columns) {
    std::printf("%-20s %-44s %s\n", c.name.c_str(), c.arrow_type.c_str(),
                c.suggested.empty() ? "(not read by stoker)" : c.suggested.c_str());
  }
  if (!flags.empty()) std::printf("inferred  %s\n", FieldFlags(flags).c_str());
  return Status::Ok();
}

// A dataset manifest, read and checked as a loader reads it (path or URL).
Status InspectManifest(const InspectOptions& opt) {
  STOKER_ASSIGN_OR_RETURN(DatasetManifest m, ReadManifest(opt.shard, DefaultIoOptions()));
  uint64_t bytes = 0, sample_bytes = 0, largest = 0;
  for (const ShardSummary& s : m.shards) {
    bytes += s.bytes, sample_bytes += s.sample_bytes;
    largest = std::max(largest, s.max_sample_bytes);
  }
  const uint64_t samples = TotalSamples(m);
  const size_t shown = std::min(m.shards.size(), size_t(std::max(opt.samples, 0)));
  if (opt.json) {
    nlohmann::ordered_json out;
    out["manifest"] = opt.shard;
    out["key_rule"] = KeyRuleName(m.key_rule);
    out["num_shards"] = m.shards.size();
    out["num_samples"] = samples;
    out["size_bytes"] = bytes;
    out["sample_bytes"] = sample_bytes;
    out["max_sample_bytes"] = largest;
    out["shards"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < shown; ++i) {
      const ShardSummary& s = m.shards[i];
      out["shards"].push_back({{"path", s.path}, {"bytes", s.bytes}, {"samples", s.samples},
                               {"sample_bytes", s.sample_bytes}, {"max_sample_bytes", s.max_sample_bytes}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("manifest  %s\nshards    %zu (%s), key rule %s\nsamples   %llu, mean %s, largest %s\n",
              opt.shard.c_str(), m.shards.size(), FormatBytes(double(bytes)).c_str(), KeyRuleName(m.key_rule),
              (unsigned long long)samples, FormatBytes(samples ? double(sample_bytes) / samples : 0.0).c_str(),
              FormatBytes(double(largest)).c_str());
  if (shown > 0) std::printf("first %zu shards:\n", shown);
  for (size_t i = 0; i < shown; ++i) {
    const ShardSummary& s = m.shards[i];
    std::printf("  %s: %u samples, %s\n", s.path.c_str(), s.samples, FormatBytes(double(s.bytes)).c_str());
  }
  return Status::Ok();
}

Status RunInspect(const InspectOptions& opt) {
  if (IsManifestPath(opt.shard)) return InspectManifest(opt);
  if (opt.shard.ends_with(".idx") || opt.shard.ends_with(".bin")) return InspectTokens(opt.shard, opt.json);
  if (IsParquetPath(opt.shard)) return InspectParquet(opt);
  if (IsImageFolderSource({opt.shard})) return InspectImageFolder(opt);
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> file, OpenReader(opt.shard, DefaultIoOptions()));  // path or URL
  const uint64_t shard_size = file->Size();
  STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> members, ScanTar(*file, shard_size));
  KeyRule rule;
  STOKER_ASSIGN_OR_RETURN(std::vector<SampleEntry> samples, GroupWithRule(members, opt.key_rule, opt.shard, &rule));
  std::map<std::string, FieldStats> fields;
  for (const SampleEntry& s : samples) {
    for (const MemberRef& m : s.members) fields[m.field].count++, fields[m.field].total += m.size;
  }
  const size_t shown = std::min(samples.size(), size_t(std::max(opt.samples, 0)));

  if (opt.json) {
    nlohmann::ordered_json out;
    out["shard"] = opt.shard;
    out["size_bytes"] = shard_size;  // uncompressed, for a .tar.gz
    out["compression"] = file->Compression() ? file->Compression() : "none";
    out["key_rule"] = KeyRuleName(rule);
    out["num_members"] = members.size();
    out["num_samples"] = samples.size();
    out["fields"] = nlohmann::ordered_json::object();
    for (const auto& [name, st] : fields) {
      out["fields"][name] = {{"count", st.count}, {"total_bytes", st.total},
                             {"mean_bytes", st.count ? double(st.total) / st.count : 0.0}};
    }
    out["samples"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < shown; ++i) {
      nlohmann::ordered_json sample = {{"key", samples[i].key}, {"begin", samples[i].begin}, {"end", samples[i].end}};
      sample["members"] = nlohmann::ordered_json::array();
      for (const MemberRef& m : samples[i].members) {
        sample["members"].push_back({{"name", m.name}, {"field", m.field}, {"offset", m.offset}, {"size", m.size}});
      }
      out["samples"].push_back(std::move(sample));
    }
    // The -f flags bench/doctor would infer, as argv words to splice into a
    // command ([] when nothing fits or the first sample cannot be read).
    out["inferred_flags"] = nlohmann::ordered_json::array();
    if (Result<std::vector<std::string>> inferred = InferFields(opt.shard, rule); inferred.ok()) {
      for (const std::string& f : *inferred) out["inferred_flags"].push_back("-f"), out["inferred_flags"].push_back(f);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }

  std::printf("shard     %s (%s%s)\nsamples   %zu (key rule %s), %zu members\n", opt.shard.c_str(),
              FormatBytes(double(shard_size)).c_str(),
              file->Compression() ? (std::string(" uncompressed, ") + file->Compression()).c_str() : "",
              samples.size(), KeyRuleName(rule), members.size());
  std::printf("%-20s %8s %12s %12s\n", "field", "count", "total", "mean");
  for (const auto& [name, st] : fields) {
    std::printf("%-20s %8llu %12s %12s\n", name.c_str(), (unsigned long long)st.count,
                FormatBytes(double(st.total)).c_str(), FormatBytes(double(st.total) / st.count).c_str());
  }
  if (Result<std::vector<std::string>> inferred = InferFields(opt.shard, rule); inferred.ok() && !inferred->empty()) {
    std::printf("inferred  %s\n", FieldFlags(*inferred).c_str());
  }
  if (shown > 0) std::printf("first %zu samples:\n", shown);
  for (size_t i = 0; i < shown; ++i) {
    std::printf("  %s:", samples[i].key.c_str());
    for (const MemberRef& m : samples[i].members) {
      std::printf("  %s %s", m.field.c_str(), FormatBytes(double(m.size)).c_str());
    }
    std::printf("\n");
  }
  return Status::Ok();
}

}  // namespace

void RegisterInspect(CLI::App& app, Status* status) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show the samples and fields of a tar shard (.tar or .tar.gz), a Parquet file, an image folder, a Megatron .idx, or a dataset manifest (.json)");
  cmd->add_option("SHARD", opt->shard, "tar shard")->required();
  cmd->add_option("-n,--samples", opt->samples, "how many samples (of a manifest: shards) to list")->capture_default_str();
  cmd->add_option("--key-rule", opt->key_rule, "how members group into samples")
      ->capture_default_str()->check(CLI::IsMember({"auto", "webdataset", "underscore"}));
  cmd->add_flag("--json", opt->json, "one JSON object on stdout");
  cmd->callback([=] { *status = RunInspect(*opt); });
}

}  // namespace stoker::cli
