// io/url.cc — see url.h.
#include "io/url.h"

#include <cctype>

namespace stoker {

namespace {

// hf:// is stoker's own name for a Hub file (io/hf.h), with no query: a '?'
// in it is a glob wildcard, as in HfFileSystem.
bool HasQueryScheme(std::string_view url) { return url.starts_with("http://") || url.starts_with("https://"); }

// Where a URL inside a text ends: at white space, a quote or an angle
// bracket; punctuation that ends a sentence or a clause ("URL: cause",
// "(URL)") is not part of it.
size_t UrlEnd(std::string_view text, size_t from) {
  size_t end = from;
  while (end < text.size()) {
    const char c = text[end];
    if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`') break;
    ++end;
  }
  while (end > from && std::string_view(":,;.)]}").find(text[end - 1]) != std::string_view::npos) --end;
  return end;
}

// "name=value&flag" -> "name=…&…": every value (a bare item is a value).
std::string RedactQuery(std::string_view query) {
  std::string out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view item = query.substr(start, amp - start);
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos) {
      out.append(item.substr(0, eq + 1));
      if (eq + 1 < item.size()) out.append(kRedacted);
    } else if (!item.empty()) {
      out.append(kRedacted);
    }
    if (amp == query.size()) break;
    out.push_back('&');
    start = amp + 1;
  }
  return out;
}

}  // namespace

UrlParts SplitQuery(const std::string& url) {
  if (!HasQueryScheme(url)) return {url, ""};
  const size_t q = url.find_first_of("?#");
  if (q == std::string::npos) return {url, ""};
  return {url.substr(0, q), url.substr(q)};
}

std::string WithSuffix(const std::string& url, std::string_view ext) {
  UrlParts p = SplitQuery(url);
  return p.path + std::string(ext) + p.suffix;
}

bool PathEndsWith(const std::string& url, std::string_view ext) { return SplitQuery(url).path.ends_with(ext); }

std::string RedactUrl(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  std::string out;
  const size_t host = scheme + 3;
  size_t authority_end = url.find_first_of("/?#", host);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  const size_t at = url.substr(0, authority_end).rfind('@');
  if (at != std::string_view::npos && at >= host) {  // user[:password]@host
    std::string_view userinfo = url.substr(host, at - host);
    const size_t colon = userinfo.find(':');
    out.append(url.substr(0, host));
    out.append(colon == std::string_view::npos ? userinfo : userinfo.substr(0, colon + 1));
    if (colon != std::string_view::npos) out.append(kRedacted);
    out.append(url.substr(at, authority_end - at));
  } else {
    out.append(url.substr(0, authority_end));
  }
  std::string_view rest = url.substr(authority_end);
  const size_t q = rest.find('?');
  const size_t hash = rest.find('#');
  if (q == std::string_view::npos || (hash != std::string_view::npos && hash < q)) {
    // No query: a fragment (which some links use for a key) is shown as "#…".
    out.append(rest.substr(0, hash));
    if (hash != std::string_view::npos) out.append("#").append(hash + 1 < rest.size() ? kRedacted : "");
    return out;
  }
  out.append(rest.substr(0, q + 1));
  std::string_view query = rest.substr(q + 1, hash == std::string_view::npos ? std::string_view::npos : hash - q - 1);
  out.append(RedactQuery(query));
  if (hash != std::string_view::npos) out.append("#").append(hash + 1 < rest.size() ? kRedacted : "");
  return out;
}

std::string RedactUrls(std::string_view text) {
  std::string out;
  size_t done = 0;  // text[0, done) is in out
  for (size_t p = text.find("://"); p != std::string_view::npos; p = text.find("://", p + 3)) {
    size_t begin = p;  // back over the scheme's letters
    while (begin > done && (std::isalnum(static_cast<unsigned char>(text[begin - 1])) || text[begin - 1] == '+' ||
                            text[begin - 1] == '-' || text[begin - 1] == '.')) {
      --begin;
    }
    if (begin == p) continue;  // no scheme
    const size_t end = UrlEnd(text, p + 3);
    out.append(text.substr(done, begin - done));
    out.append(RedactUrl(text.substr(begin, end - begin)));
    done = end;
    p = end >= 3 ? end - 3 : 0;
  }
  out.append(text.substr(done));
  return out;
}

Status CheckScheme(const std::string& url) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos || sep == 0) return Status::Ok();
  const std::string scheme = url.substr(0, sep);
  if (!std::isalpha(static_cast<unsigned char>(scheme[0]))) return Status::Ok();
  for (char c : scheme) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return Status::Ok();  // a path
  }
  std::string lower;
  for (char c : scheme) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "http" || lower == "https" || lower == "s3" || lower == "hf") return Status::Ok();
  std::string hint;
  if (lower == "gs" || lower == "gcs") {
    hint = " Google Cloud Storage's XML API is S3-compatible: make an HMAC key for the bucket (as "
           "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or a profile) and read s3://BUCKET/PATH with "
           "s3_endpoint=\"https://storage.googleapis.com\".";
  } else if (lower == "az" || lower == "abfs" || lower == "abfss" || lower == "wasb" || lower == "wasbs") {
    hint = " An Azure blob is read over https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH with a SAS token "
           "in its query.";
  } else if (lower == "file") {
    hint = " Give the local path itself.";
  }
  return InvalidArgument("'" + RedactUrl(url) + "': stoker does not read " + scheme +
                         ":// URLs; it reads local paths, http://, https://, s3:// and hf://." + hint);
}

}  // namespace stoker
