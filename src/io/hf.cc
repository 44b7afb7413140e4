// io/hf.cc — see hf.h.
#include "io/hf.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/s3.h"
#include "io/url.h"

namespace stoker {

namespace {

std::string Endpoint(const IoOptions& o) {
  std::string e = o.hf_endpoint.empty() ? "https://huggingface.co" : o.hf_endpoint;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

HttpTarget HubTarget(const std::string& url, const std::string& name, const IoOptions& o) {
  HttpTarget t = HttpTargetFor(url, o);
  t.name = name;
  if (!o.hf_token.empty()) t.headers.push_back("Authorization: Bearer " + o.hf_token);
  return t;
}

// The value of `<url>; rel="next"` in a Link header, or "".
std::string NextLink(const std::string& link) {
  for (size_t p = 0; (p = link.find('<', p)) != std::string::npos;) {
    const size_t e = link.find('>', p);
    if (e == std::string::npos) break;
    const size_t next = link.find(',', e);
    const std::string params = link.substr(e, next == std::string::npos ? std::string::npos : next - e);
    if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos) {
      return link.substr(p + 1, e - p - 1);
    }
    p = e;
  }
  return "";
}

}  // namespace

Result<HfUrl> ParseHfUrl(const std::string& url) {
  if (!url.starts_with("hf://")) return InvalidArgument("not an hf:// URL: '" + RedactUrl(url) + "'");
  const std::string rest = url.substr(5);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = rest.find('/', start);
    parts.push_back(rest.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  HfUrl u;
  size_t i = 0;
  u.kind = "models";
  if (parts[0] == "datasets" || parts[0] == "spaces" || parts[0] == "models") u.kind = parts[i++];
  if (parts.size() < i + 2 || parts[i].empty() || parts[i + 1].empty()) {
    return InvalidArgument("'" + RedactUrl(url) +
                           "': an hf:// URL names a repository: hf://datasets/ORG/NAME/PATH (or NAME@REVISION)");
  }
  std::string name = parts[i + 1];
  u.revision = "main";
  size_t next = i + 2;
  bool has_revision = false;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    has_revision = true;
    u.revision = PercentDecode(name.substr(at + 1));
    name.resize(at);
    // "refs/pr/1", "refs/convert/parquet" written unescaped, as HfFileSystem accepts them.
    if (u.revision == "refs" && parts.size() >= next + 2) {
      u.revision += "/" + parts[next] + "/" + parts[next + 1];
      next += 2;
    }
    if (u.revision.empty()) return InvalidArgument("'" + RedactUrl(url) + "': empty revision after '@'");
  }
  u.repo = parts[i] + "/" + name;
  for (size_t k = next; k < parts.size(); ++k) u.path += (k > next ? "/" : "") + parts[k];
  u.prefix = "hf://" + (u.kind == "models" && parts[0] != "models" ? "" : u.kind + "/") + u.repo;
  if (has_revision) u.prefix += "@" + UriEscape(u.revision, false);
  u.prefix += "/";
  return u;
}

std::string HfTokenFromEnvironment() {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    const char* v = std::getenv(name);
    if (v && *v) return v;
  }
  std::string file;
  if (const char* v = std::getenv("HF_TOKEN_PATH"); v && *v) {
    file = v;
  } else if (const char* home = std::getenv("HF_HOME"); home && *home) {
    file = std::string(home) + "/token";
  } else if (const char* user = std::getenv("HOME"); user && *user) {
    file = std::string(user) + "/.cache/huggingface/token";
  }
  std::ifstream in(file);
  std::string token;
  if (in) std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

Result<HttpTarget> HfTarget(const std::string& hf_url, const IoOptions& o) {
  STOKER_ASSIGN_OR_RETURN(HfUrl u, ParseHfUrl(hf_url));
  if (u.path.empty()) return InvalidArgument("'" + RedactUrl(hf_url) + "' names a repository, not a file in it");
  const std::string kind = u.kind == "models" ? "" : "/" + u.kind;
  std::string url = Endpoint(o) + kind + "/" + u.repo + "/resolve/" + UriEscape(u.revision, false) + "/" +
                    UriEscape(u.path, true);
  return HubTarget(url, hf_url, o);
}

Result<std::vector<std::string>> HfListFiles(const HfUrl& u, const std::string& dir, const IoOptions& o) {
  std::string url = Endpoint(o) + "/api/" + u.kind + "/" + u.repo + "/tree/" + UriEscape(u.revision, false) +
                    (dir.empty() ? "" : "/" + UriEscape(dir, true)) + "?recursive=true";
  std::vector<std::string> files;
  for (int page = 0; !url.empty(); ++page) {
    HttpTarget t = HubTarget(url, u.prefix + dir + " (the Hub's tree API)", o);
    std::string link;
    STOKER_ASSIGN_OR_RETURN(std::string body, HttpGetWhole(t, o, &link));
    nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_array()) {
      return DataLoss(RedactUrl(url) + ": the Hub's tree listing is not a JSON list (page " + std::to_string(page) + ")");
    }
    for (const nlohmann::json& e : doc) {
      if (!e.is_object() || !e.contains("type") || !e.contains("path") || !e["path"].is_string()) continue;
      if (e["type"] == "file") files.push_back(e["path"].get<std::string>());
    }
    url = NextLink(link);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace stoker
