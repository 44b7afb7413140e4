// io/s3.cc — see s3.h.
#include "io/s3.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <sstream>

#include "io/aws_credentials.h"

namespace stoker {

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::string XmlUnescape(std::string s) {
  static const std::pair<const char*, const char*> kRep[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (auto [from, to] : kRep) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to)) s.replace(p, std::strlen(from), to);
  }
  return s;
}

std::vector<std::string> XmlAll(const std::string& doc, const std::string& tag) {
  std::vector<std::string> out;
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  for (size_t p = 0; (p = doc.find(open, p)) != std::string::npos;) {
    size_t e = doc.find(close, p);
    if (e == std::string::npos) break;
    out.push_back(XmlUnescape(doc.substr(p + open.size(), e - p - open.size())));
    p = e + close.size();
  }
  return out;
}

// The chain of io/aws_credentials.h for these options; null: unsigned.
Result<std::shared_ptr<CredentialProvider>> Credentials(const IoOptions& o) {
  auto p = SharedCredentialChain(AwsSettings{o.profile, o.region});
  if (!p.ok()) return p.status().WithContext("AWS credentials");
  return p;
}

HttpTarget Signed(std::string url, std::string name, const std::shared_ptr<CredentialProvider>& credentials,
                  const std::string& region) {
  HttpTarget t;
  t.url = std::move(url);
  t.name = std::move(name);
  if (credentials) {
    t.sigv4 = "aws:amz:" + region + ":s3";
    t.credentials = credentials;
  }
  return t;
}

std::string BucketUrl(const std::string& bucket, const IoOptions& o, const std::string& region) {
  if (!o.s3_endpoint.empty()) {
    std::string e = o.s3_endpoint;
    while (!e.empty() && e.back() == '/') e.pop_back();
    return e + "/" + UriEscape(bucket, false);
  }
  return "https://" + bucket + ".s3." + region + ".amazonaws.com";
}

}  // namespace

Result<S3Url> ParseS3Url(const std::string& url) {
  if (!url.starts_with("s3://")) return InvalidArgument("not an s3:// URL: '" + url + "'");
  std::string rest = url.substr(5);
  size_t slash = rest.find('/');
  if (slash == 0 || rest.empty()) return InvalidArgument("s3 URL without a bucket: '" + url + "'");
  S3Url u;
  u.bucket = rest.substr(0, slash);
  u.key = slash == std::string::npos ? "" : rest.substr(slash + 1);
  return u;
}

std::string UriEscape(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/')) {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

std::map<std::string, std::string> ReadAwsIniSection(const std::string& text, const std::string& section) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = Trim(line.substr(1, line.size() - 2)) == section;
      continue;
    }
    size_t eq = line.find('=');
    if (inside && eq != std::string::npos) out[Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

Result<HttpTarget> S3Target(const std::string& s3_url, const IoOptions& options) {
  STOKER_ASSIGN_OR_RETURN(S3Url u, ParseS3Url(s3_url));
  if (u.key.empty()) return InvalidArgument("s3 URL names no object: '" + s3_url + "'");
  STOKER_ASSIGN_OR_RETURN(auto credentials, Credentials(options));
  const std::string region = ResolveAwsRegion(AwsSettings{options.profile, options.region});
  return Signed(BucketUrl(u.bucket, options, region) + "/" + UriEscape(u.key, true), s3_url, credentials, region);
}

Result<std::vector<std::string>> S3ListKeys(const std::string& bucket, const std::string& prefix,
                                            const IoOptions& options) {
  STOKER_ASSIGN_OR_RETURN(auto credentials, Credentials(options));
  const std::string region = ResolveAwsRegion(AwsSettings{options.profile, options.region});
  std::vector<std::string> keys;
  std::string token;
  for (int page = 0;; ++page) {
    std::string url = BucketUrl(bucket, options, region) + "/?list-type=2&prefix=" + UriEscape(prefix, false);
    if (!token.empty()) url += "&continuation-token=" + UriEscape(token, false);
    HttpTarget t = Signed(url, "s3://" + bucket + "/" + prefix + " (ListObjectsV2)", credentials, region);
    STOKER_ASSIGN_OR_RETURN(std::string body, HttpGetWhole(t, options));
    for (auto& k : XmlAll(body, "Key")) keys.push_back(std::move(k));
    auto truncated = XmlAll(body, "IsTruncated");
    auto next = XmlAll(body, "NextContinuationToken");
    if (truncated.empty() || truncated[0] != "true" || next.empty()) break;
    token = next[0];
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace stoker
