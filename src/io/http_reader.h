// io/http_reader.h — RandomAccessReader over an HTTP(S) object: ranged GETs
// on reused connections (one libcurl easy handle per thread, kept across
// requests, so its connection cache serves the next GET), with retries.
//
// Open sends a HEAD and pins the object's size and ETag; the first version a
// process opens stays pinned for the process (a later Open of the same URL
// that finds another size or ETag is DataLoss). Every read is one
// ranged GET sent with If-Match: <etag> (to where the object is: not to a URL
// that answers with a redirect, whose own validators differ); a response whose ETag or
// Content-Range total differs from the pinned ones is DataLoss (the object
// changed: never mix bytes of two versions). Transient faults (resets,
// timeouts, a connection that delivers nothing for stall_ms, 408/429/5xx,
// short bodies, a name that stops resolving) are retried with capped,
// jittered exponential backoff (io/backoff.h), each retry resuming from the
// first byte not yet received, until the request's retry deadline
// (IoOptions::retry_deadline_ms, 2 minutes: an outage of a minute costs a
// minute, not the run; io/outage.h logs it and feeds report()). Permanent
// answers fail at once: 404 is kNotFound, 412 and a changed object
// kDataLoss, other 4xx kIoError ("not retried"). When the budget is spent
// the error names the URL, range, last status, attempts, elapsed time and
// which limit ended it (code kIoError).
// With a CredentialProvider (S3 through io/aws_credentials.h) each attempt is
// signed with its current credentials; a 400/403 whose body names an expired
// or invalid token (ExpiredToken, InvalidToken, RequestExpired,
// TokenRefreshRequired; for a HEAD, which has no body, any 400/403 under
// temporary credentials) invalidates them and is tried again, twice at most.
// Redirects (301, 302, 303, 307, 308) are followed, 5 hops at most. Open's
// HEAD finds where the object is; its ranged GETs go there directly, the
// location remembered (with the pinned size and ETag, for the process) until
// it is kLocationTtlS old or answers 401/403/404/410, when the object is
// resolved again from its own URL, once per read. A hop to another scheme,
// host or port gets no credentials: no SigV4 signature, no session token, no
// header of HttpTarget::headers (Authorization above all) goes beyond the
// target's own origin (redirects are followed here, not by libcurl, so that
// rule does not depend on libcurl's). A redirect's target that refuses the
// HEAD (403/405: a presigned link signed for GET only) is asked for its first
// byte by ranged GET instead, whose Content-Range gives the size.
// Messages name the object redacted (io/url.h): a query's values never
// appear in an error, a log line or report().
// A read on a thread whose Cancellation (io/cancel.h) fires stops: no further
// attempt, the back-off cut short, a transfer in flight aborted (kCancelled).
// Thread-safety: ReadAt from many threads at once (each uses its own handle).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/reader.h"

namespace stoker {

class CredentialProvider;  // io/aws_credentials.h

// Where and how to send a request: S3 fills the signing fields (io/s3.h).
struct HttpTarget {
  std::string url;        // http(s)://host/path?query, already escaped
  std::string name;       // for messages: the URL the user wrote
  std::string sigv4;      // "aws:amz:<region>:s3" or "" (no signing)
  std::string userpwd;    // "<access key>:<secret>" with sigv4
  std::string token;      // session token (x-amz-security-token) or ""
  // With sigv4: signs each attempt instead of userpwd/token (temporary
  // credentials, refreshed).
  std::shared_ptr<CredentialProvider> credentials;
  // "Name: value" lines sent to url's own origin only (io/hf.h's token, a
  // loader's http_headers).
  std::vector<std::string> headers;
};

// An unsigned target for an http(s) URL with the loader's own headers.
HttpTarget HttpTargetFor(const std::string& url, const IoOptions& options);

// How long a redirect's final location is used before the object is
// resolved again (CDN links are signed for an hour or more).
inline constexpr int kLocationTtlS = 600;

class HttpReader : public RandomAccessReader {
 public:
  static Result<std::unique_ptr<HttpReader>> Open(HttpTarget target, const IoOptions& options);

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> out) const override;
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return target_.name; }
  size_t PreferredReadSize() const override { return 8u << 20; }
  bool remote() const override { return true; }
  const std::string& etag() const { return etag_; }

 private:
  HttpReader(HttpTarget target, const IoOptions& options);
  // Where reads go now ("" : target_.url), resolved again when it has
  // expired; moved: the URL answered with a redirect.
  std::string Where(bool* moved) const;
  void Moved(const std::string& from, const std::string& to) const;  // a read found it elsewhere
  HttpTarget target_;
  IoOptions options_;
  uint64_t size_ = 0;
  std::string etag_;
};

// A whole object by GET with the same retries (index sidecars, listings);
// link: the answer's Link header (a listing's next page), when asked for.
Result<std::string> HttpGetWhole(const HttpTarget& target, const IoOptions& options, std::string* link = nullptr);

}  // namespace stoker
