// io/url.h — URLs as users have them: a query string taken literally, the
// schemes stoker reads, and URLs put into text with their secrets left out.
//
// An http(s):// URL is its path plus, from the first '?' or '#', a
// suffix that is the server's business: brace ranges, globs, the sidecar
// name (".idx") and a name's extension (".gz", ".parquet") apply to the path
// only, and the suffix is kept as written ("shard.tar?token=x" has the sidecar
// "shard.tar.idx?token=x"). A local path, an s3:// key or an hf:// path has no
// query: '?' in it is a glob wildcard or a literal character.
// A query often carries a credential (a presigned X-Amz-Signature, a CDN's
// token=...), as does "user:password@" in a URL: RedactUrl shows a URL with
// every query value and any password replaced by "…"; RedactUrls does that to
// every URL inside a text, and is applied where text leaves the library
// (exceptions, logs, report(), state). A URL is never put into a message
// unredacted on purpose: HttpReader::Name is redacted already.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "stoker/status.h"

namespace stoker {

// The ellipsis that replaces a secret (UTF-8).
inline constexpr std::string_view kRedacted = "\xE2\x80\xA6";

struct UrlParts {
  std::string path;    // through the character before the query
  std::string suffix;  // "?query" and/or "#fragment" as written, or ""
};
// Splits an http(s):// URL at its query; anything else is all path.
UrlParts SplitQuery(const std::string& url);

// The path's name plus `ext`, the query kept: "a.tar?t=1" + ".idx" ->
// "a.tar.idx?t=1".
std::string WithSuffix(const std::string& url, std::string_view ext);

// The URL's path ends with `ext` (its query left out).
bool PathEndsWith(const std::string& url, std::string_view ext);

std::string RedactUrl(std::string_view url);
std::string RedactUrls(std::string_view text);

// "gs://...", "ftp://...": a scheme stoker does not read is InvalidArgument
// naming those it reads (and for gs://, how to reach GCS through s3://).
// Local paths and the schemes read are Ok.
Status CheckScheme(const std::string& url);

}  // namespace stoker
