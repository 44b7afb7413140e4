// pipeline/sources.cc — turning what a user writes into a list of shard paths.
//
// "a-{000..031}.tar" expands numerically, keeping the zero padding (as
// braceexpand and webdataset do); "{a,b}" expands to alternatives; globs go
// through glob(3) and sort; a ".txt" source lists one shard per line. A
// pattern that matches nothing and a listed file that is missing are errors:
// a typo must not silently train on less data.
// Remote sources (io/reader.h): "s3://b/p/x-{0..9}.tar" and "http(s)://..."
// brace-expand locally without listing; an s3 glob ("s3://b/p/*.tar") lists
// the prefix before its first wildcard once (ListObjectsV2) and matches the
// keys with fnmatch; an hf:// glob lists the directory above its first
// wildcard once (the Hub's tree API, io/hf.h); HTTP has no listing, so an
// HTTP glob is an error. An http(s):// URL's query is taken
// literally (io/url.h): braces and globs apply to its path, and each shard
// keeps the query ("a-{0..1}.tar?t=x" -> "a-0.tar?t=x", "a-1.tar?t=x"). A
// scheme stoker does not read ("gs://") is an error that says which it does.
// A remote shard's existence is checked when it is opened (its index built).
#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "io/reader.h"
#include "io/hf.h"
#include "io/s3.h"
#include "io/url.h"
#include "stoker/loader.h"

namespace stoker {

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsTarShardName(const std::string& path) {
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd"}) {
    if (path.ends_with(ext)) return true;
  }
  return false;
}

// A glob over a folder of shards that also catches what writers put beside
// them (img2dataset's .parquet and _stats.json, a sidecar index): reading
// those as tar would fail later on a header, far from the cause. Said here,
// with the pattern that takes the shards alone.
Status CheckGlobMatchesShards(const std::string& pattern, const std::vector<std::string>& matched) {
  std::vector<std::string> others;
  size_t shards = 0;
  for (const std::string& path : matched) (IsTarShardName(path) ? ++shards : (others.push_back(path), 0));
  if (shards == 0 || others.empty()) return Status::Ok();
  std::string shown;
  for (size_t i = 0; i < std::min<size_t>(others.size(), 3); ++i) shown += (i ? ", '" : "'") + others[i] + "'";
  if (others.size() > 3) shown += ", ...";
  const size_t slash = pattern.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : pattern.substr(0, slash + 1);
  return InvalidArgument("pattern '" + pattern + "' matches " + std::to_string(shards) + " tar shards and " +
                         std::to_string(others.size()) + " other files (" + shown +
                         "), which are not tar shards: pass the shards alone, e.g. '" + dir + "*.tar'");
}

Result<std::vector<std::string>> ExpandBraces(const std::string& s) {
  size_t open = s.find('{');
  if (open == std::string::npos) return std::vector<std::string>{s};
  size_t close = s.find('}', open);
  if (close == std::string::npos) return InvalidArgument("unbalanced '{' in source '" + s + "'");
  std::string body = s.substr(open + 1, close - open - 1);
  std::string head = s.substr(0, open);
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> tails, ExpandBraces(s.substr(close + 1)));

  std::vector<std::string> items;
  size_t dots = body.find("..");
  if (dots != std::string::npos) {
    std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
        hi.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument("bad range '{" + body + "}' in source '" + s + "'");
    }
    long long a = std::stoll(lo), b = std::stoll(hi);
    if (b < a) return InvalidArgument("empty range '{" + body + "}' in source '" + s + "'");
    size_t width = lo.size();
    for (long long i = a; i <= b; ++i) {
      std::string n = std::to_string(i);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      items.push_back(n);
    }
  } else {
    size_t start = 0;
    while (true) {
      size_t comma = body.find(',', start);
      items.push_back(body.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<std::string> out;
  for (const auto& item : items)
    for (const auto& tail : tails) out.push_back(head + item + tail);
  return out;
}

Result<std::vector<std::string>> ExpandOne(const std::string& source, const IoOptions& io) {
  if (source.size() > 4 && source.ends_with(".txt")) {
    std::ifstream in(source);
    if (!in) return NotFound("shard list '" + source + "' cannot be opened");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      out.push_back(ResolveFrom(source, line));  // relative to the list file
    }
    return out;
  }
  STOKER_RETURN_IF_ERROR(CheckScheme(source));
  const UrlParts parts = SplitQuery(source);  // the query is taken literally
  STOKER_ASSIGN_OR_RETURN(std::vector<std::string> braced, ExpandBraces(parts.path));
  std::vector<std::string> out;
  for (const auto& pattern : braced) {
    if (pattern.find_first_of("*?[") == std::string::npos) {
      out.push_back(pattern + parts.suffix);
      continue;
    }
    if (pattern.starts_with("hf://")) {
      STOKER_ASSIGN_OR_RETURN(HfUrl u, ParseHfUrl(pattern));
      const size_t wild = u.path.find_first_of("*?[");
      const size_t slash = u.path.rfind('/', wild);
      const std::string dir = slash == std::string::npos ? "" : u.path.substr(0, slash);
      STOKER_ASSIGN_OR_RETURN(std::vector<std::string> files, HfListFiles(u, dir, io));
      size_t n = 0;
      for (const auto& file : files) {
        if (::fnmatch(u.path.c_str(), file.c_str(), FNM_PATHNAME) == 0) {
          out.push_back(u.prefix + file + parts.suffix);
          ++n;
        }
      }
      if (n == 0) return NotFound("pattern '" + RedactUrl(pattern) + "' matches no file of the repository");
      continue;
    }
    if (pattern.starts_with("s3://")) {
      STOKER_ASSIGN_OR_RETURN(S3Url u, ParseS3Url(pattern));
      const std::string prefix = u.key.substr(0, u.key.find_first_of("*?["));
      STOKER_ASSIGN_OR_RETURN(std::vector<std::string> keys, S3ListKeys(u.bucket, prefix, io));
      size_t n = 0;
      for (const auto& key : keys) {
        if (::fnmatch(u.key.c_str(), key.c_str(), FNM_PATHNAME) == 0) {
          out.push_back("s3://" + u.bucket + "/" + key);
          ++n;
        }
      }
      if (n == 0) return NotFound("pattern '" + pattern + "' matches no object");
      continue;
    }
    if (IsRemoteUrl(pattern)) {
      return InvalidArgument("'" + RedactUrl(source) +
                             "': HTTP has no listing; use a brace range {000..099} (a query after '?' is taken "
                             "literally, so its '?' is no wildcard)");
    }
    glob_t g{};
    int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc != 0) {
      globfree(&g);
      return NotFound("pattern '" + pattern + "' matches no file");
    }
    std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matched.begin(), matched.end());
    STOKER_RETURN_IF_ERROR(CheckGlobMatchesShards(pattern, matched));
    out.insert(out.end(), matched.begin(), matched.end());
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& sources) {
  return ExpandSources(sources, DefaultIoOptions());
}

Result<std::vector<std::string>> ExpandSources(const std::vector<std::string>& sources, const StorageOptions& io) {
  std::vector<std::string> shards;
  for (const auto& source : sources) {
    STOKER_ASSIGN_OR_RETURN(std::vector<std::string> expanded, ExpandOne(source, io));
    for (auto& path : expanded) {
      STOKER_RETURN_IF_ERROR(CheckScheme(path));  // a list's entries too
      if (!IsRemoteUrl(path) && !Exists(path)) return NotFound("shard '" + path + "' does not exist (from source '" + source + "')");
      shards.push_back(std::move(path));
    }
  }
  if (shards.empty()) return InvalidArgument("no shards given");
  return shards;
}

}  // namespace stoker
