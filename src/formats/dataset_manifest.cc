// formats/dataset_manifest.cc — see dataset_manifest.h. The file is JSON:
//
//   {"format": "stoker-manifest", "version": 1, "key_rule": "webdataset",
//    "samples": 20000,
//    "shards": [
//      {"path": "shard-000000.tar", "bytes": 10762240, "samples": 10000,
//       "sample_bytes": 10752000, "max_sample_bytes": 1536},
//      ...]}
//
// "key_rule" is spelled as in the sidecars (KeyRuleName); "samples" at the top
// is the sum of the shards' and is checked against it, so a manifest cut or
// edited by hand is caught before an epoch is planned on it. Keys this version
// does not know are ignored (a later minor addition reads here); every key it
// knows is required and checked.
// Thread-safety: free functions keep no state.
#include "formats/dataset_manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include "core/file.h"
#include "formats/text_check.h"
#include "io/url.h"

namespace stoker {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kFormat[] = "stoker-manifest";
constexpr uint64_t kVersion = 1;

// What a malformed manifest says: the manifest, then where in it.
struct Complaint {
  std::string manifest;  // redacted: a presigned query is a credential
  Status operator()(const std::string& why) const { return DataLoss(manifest + ": not a valid stoker manifest: " + why); }
};

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// A JSON value's type, in words, for "is a string, not a count"; a number
// or string shown as written, up to 40 characters of it.
std::string TypeOf(const json& j) {
  auto shown = [&] {
    std::string text = j.dump();  // the parser took only valid UTF-8, so dump does not throw
    if (text.size() <= 40) return text;
    size_t cut = 37;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    return text.substr(0, cut) + "...";
  };
  if (j.is_number_integer() && !j.is_number_unsigned()) return "negative (" + shown() + ")";
  if (j.is_number_float()) return "a fraction (" + shown() + ")";
  return std::string(j.type_name()) + (j.is_string() ? " (" + shown() + ")" : "");
}

// An unsigned integer field of `obj`, or why not (`where` names obj).
Status ReadCount(const json& obj, const char* key, uint64_t max, const std::string& where, const Complaint& bad,
                 uint64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(where + "\"" + key + "\" is missing");
  if (!it->is_number_unsigned()) return bad(where + "\"" + key + "\" is " + TypeOf(*it) + ", not a count");
  const uint64_t v = it->get<uint64_t>();
  if (v > max) return bad(where + "\"" + key + "\" is " + std::to_string(v) + ", over the most " + std::to_string(max));
  *out = v;
  return Status::Ok();
}

Status ReadString(const json& obj, const char* key, const std::string& where, const Complaint& bad, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(where + "\"" + key + "\" is missing");
  if (!it->is_string()) return bad(where + "\"" + key + "\" is " + TypeOf(*it) + ", not a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

// One entry of "shards", its path resolved against the manifest's location.
Status ReadShard(const json& js, size_t i, const std::string& manifest, const Complaint& bad, ShardSummary* s) {
  std::string where = "shards[" + std::to_string(i) + "]: ";
  if (!js.is_object()) return bad(where + "is " + TypeOf(js) + ", not an object");
  STOKER_RETURN_IF_ERROR(ReadString(js, "path", where, bad, &s->path));
  if (s->path.empty()) return bad(where + "\"path\" is empty");
  if (Status scheme = CheckScheme(s->path); !scheme.ok()) return bad(where + scheme.message());
  where = "shards[" + std::to_string(i) + "] " + Quoted(RedactUrl(s->path)) + ": ";
  uint64_t samples = 0;
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  STOKER_RETURN_IF_ERROR(ReadCount(js, "bytes", kMax64, where, bad, &s->bytes));
  STOKER_RETURN_IF_ERROR(ReadCount(js, "samples", std::numeric_limits<uint32_t>::max(), where, bad, &samples));
  STOKER_RETURN_IF_ERROR(ReadCount(js, "sample_bytes", kMax64, where, bad, &s->sample_bytes));
  STOKER_RETURN_IF_ERROR(ReadCount(js, "max_sample_bytes", kMax64, where, bad, &s->max_sample_bytes));
  s->samples = static_cast<uint32_t>(samples);
  // Samples lie inside their shard, and none is larger than the largest.
  if (s->sample_bytes > s->bytes) {
    return bad(where + "\"sample_bytes\" " + std::to_string(s->sample_bytes) + " exceeds the shard's \"bytes\" " +
               std::to_string(s->bytes));
  }
  using Wide = unsigned __int128;  // samples x max_sample_bytes may pass 2^64
  if (s->max_sample_bytes > s->sample_bytes || Wide(s->sample_bytes) > Wide(s->samples) * s->max_sample_bytes) {
    return bad(where + "\"max_sample_bytes\" " + std::to_string(s->max_sample_bytes) + " does not fit " +
               std::to_string(s->samples) + " samples of " + std::to_string(s->sample_bytes) + " bytes in all");
  }
  s->path = ResolveFrom(manifest, s->path);
  return Status::Ok();
}

}  // namespace

ShardSummary SummaryOf(const ShardIndex& index) {
  ShardSummary s;
  s.path = index.shard_path;
  s.bytes = index.shard_size;
  s.samples = static_cast<uint32_t>(index.samples.size());
  for (SampleView v : index.samples) {
    s.sample_bytes += v.end - v.begin;
    s.max_sample_bytes = std::max<uint64_t>(s.max_sample_bytes, v.end - v.begin);
  }
  return s;
}

uint64_t TotalSamples(const DatasetManifest& manifest) {
  uint64_t n = 0;
  for (const ShardSummary& s : manifest.shards) n += s.samples;
  return n;
}

bool IsManifestPath(const std::string& source) { return PathEndsWith(source, ".json"); }

Result<DatasetManifest> ReadManifest(const std::string& path_or_url, const IoOptions& io) {
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadWholeObject(path_or_url, io));  // a path or a URL: one GET
  const Complaint bad{RedactUrl(path_or_url)};
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  text = std::string();  // the DOM is all that is needed now
  if (doc.is_discarded()) return bad("invalid JSON");
  if (!doc.is_object()) return bad("the top level is " + TypeOf(doc) + ", not an object");
  std::string format, rule_name;
  uint64_t version = 0, total = 0;
  STOKER_RETURN_IF_ERROR(ReadString(doc, "format", "", bad, &format));
  if (format != kFormat) return bad("\"format\" is " + Quoted(format) + ", not '" + kFormat + "'");
  STOKER_RETURN_IF_ERROR(ReadCount(doc, "version", std::numeric_limits<uint64_t>::max(), "", bad, &version));
  if (version != kVersion) {
    return FailedPrecondition(bad.manifest + ": manifest version " + std::to_string(version) + ", this build reads " +
                              std::to_string(kVersion) + " (rewrite it with this version's `stoker index`)");
  }
  DatasetManifest manifest;
  STOKER_RETURN_IF_ERROR(ReadString(doc, "key_rule", "", bad, &rule_name));
  Result<KeyRule> rule = ParseKeyRule(rule_name);
  if (!rule.ok()) return bad("\"key_rule\": " + rule.status().message());
  manifest.key_rule = *rule;
  STOKER_RETURN_IF_ERROR(ReadCount(doc, "samples", std::numeric_limits<uint64_t>::max(), "", bad, &total));
  auto shards = doc.find("shards");
  if (shards == doc.end()) return bad("\"shards\" is missing");
  if (!shards->is_array()) return bad("\"shards\" is " + TypeOf(*shards) + ", not an array");
  if (shards->empty()) return bad("\"shards\" lists no shard");

  manifest.shards.resize(shards->size());
  std::unordered_set<std::string> seen;  // resolved paths: two spellings of one shard are one shard
  seen.reserve(shards->size());
  uint64_t sum = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    ShardSummary& s = manifest.shards[i];
    STOKER_RETURN_IF_ERROR(ReadShard((*shards)[i], i, path_or_url, bad, &s));
    if (!seen.insert(s.path).second) {
      const auto first = std::find_if(manifest.shards.begin(), manifest.shards.begin() + static_cast<ptrdiff_t>(i),
                                      [&](const ShardSummary& o) { return o.path == s.path; });
      const std::string& written = (*shards)[i]["path"].get_ref<const std::string&>();
      return bad("shards[" + std::to_string(i) + "] " + Quoted(RedactUrl(written)) + " is listed twice (also shards[" +
                 std::to_string(first - manifest.shards.begin()) + "])");
    }
    sum += s.samples;
  }
  if (sum != total) {
    return bad("\"samples\" is " + std::to_string(total) + " but the shards hold " + std::to_string(sum) +
               " (an entry was cut or edited)");
  }
  return manifest;
}

Status WriteManifest(const DatasetManifest& manifest, const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::absolute(fs::path(path), ec).lexically_normal().parent_path();
  if (ec) return IoError(path + ": " + ec.message());
  // One shard a line: a manifest of 41,000 shards is still read (and diffed) by people.
  std::string text = nlohmann::ordered_json({{"format", kFormat},
                           {"version", kVersion},
                           {"key_rule", KeyRuleName(manifest.key_rule)},
                           {"samples", TotalSamples(manifest)}})
                         .dump();
  text.pop_back();  // the closing '}'
  text += ",\n \"shards\": [";
  for (size_t i = 0; i < manifest.shards.size(); ++i) {
    const ShardSummary& s = manifest.shards[i];
    std::string written = s.path;
    if (!IsRemoteUrl(s.path)) {
      const fs::path shard = fs::absolute(fs::path(s.path), ec).lexically_normal();
      if (ec) return IoError(s.path + ": " + ec.message());
      const fs::path relative = shard.lexically_relative(dir);
      const bool under = !relative.empty() && *relative.begin() != "..";
      written = under ? relative.generic_string() : shard.generic_string();
    }
    // A path is any bytes; a JSON string holds only UTF-8.
    if (Status utf8 = CheckUtf8({reinterpret_cast<const uint8_t*>(written.data()), written.size()}); !utf8.ok()) {
      return InvalidArgument(path + ": shard path '" + written + "' is not UTF-8 and cannot be stored in a manifest");
    }
    nlohmann::ordered_json entry = {{"path", written},
                                    {"bytes", s.bytes},
                                    {"samples", s.samples},
                                    {"sample_bytes", s.sample_bytes},
                                    {"max_sample_bytes", s.max_sample_bytes}};
    text += i == 0 ? "\n  " : ",\n  ";
    text += entry.dump();
  }
  text += "\n]}\n";
  return WriteWholeFile(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

}  // namespace stoker
