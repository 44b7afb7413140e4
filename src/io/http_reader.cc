// io/http_reader.cc — see http_reader.h.
#include "io/http_reader.h"

#include <curl/curl.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <utility>

#include "io/aws_credentials.h"
#include "io/backoff.h"
#include "io/cancel.h"
#include "io/outage.h"
#include "io/url.h"

namespace stoker {

namespace {

using Clock = std::chrono::steady_clock;

// One easy handle per thread: curl_easy_reset keeps its connection cache, so
// consecutive requests of a thread to one host reuse the connection.
struct ThreadHandle {
  CURL* h = nullptr;
  ~ThreadHandle() {
    if (h) curl_easy_cleanup(h);
  }
};

CURL* Handle() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  thread_local ThreadHandle th;
  if (!th.h) th.h = curl_easy_init();
  else curl_easy_reset(th.h);
  return th.h;
}

// One request: a HEAD, a ranged GET into a span, or a whole GET into a string.
struct Request {
  bool head = false;
  uint64_t offset = 0;              // ranged: first byte wanted
  std::span<uint8_t> out;           // ranged: where the bytes go; empty: whole
  std::string* whole = nullptr;     // whole GET
  const std::string* pin_etag = nullptr;
  // The object lives elsewhere (its URL answers with a redirect): If-Match
  // goes to the location only (the redirect's own answer has other validators).
  bool moved = false;
  uint64_t pin_size = UINT64_MAX;
  // Filled in:
  uint64_t got = 0;                 // bytes delivered so far (across attempts)
  std::string etag;
  uint64_t length = UINT64_MAX;     // Content-Length of the last response
  uint64_t total = UINT64_MAX;      // from Content-Range
  std::string start;                // where to send it first ("" : the target's URL)
  std::string location;             // where the answer came from (after redirects)
  long code = 0;                    // the last HTTP status
  int hops = 0;                     // redirects followed
  std::string* link = nullptr;      // the answer's Link header, when asked for
};

constexpr int kMaxRedirects = 5;

bool IsRedirect(long code) { return code == 301 || code == 302 || code == 303 || code == 307 || code == 308; }

struct Attempt {
  Request* req;
  uint64_t skip = 0;      // body bytes to drop (a 200 answer to a ranged GET)
  bool ranged = false;
  bool overflow = false;  // the server sent more than asked
  std::string etag;
  uint64_t length = UINT64_MAX, total = UINT64_MAX;
  bool first_body = true;
  CURL* h = nullptr;
  std::string error_body;  // the first bytes of a non-2xx body (the store's error code)
  std::string link;        // the Link header
};

size_t OnHeader(char* buf, size_t size, size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  std::string_view line(buf, size * n);
  auto value = [&](std::string_view name) -> std::optional<std::string_view> {
    if (line.size() <= name.size() || strncasecmp(line.data(), name.data(), name.size()) != 0) return std::nullopt;
    std::string_view v = line.substr(name.size());
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
    return v;
  };
  if (line.starts_with("HTTP/")) {  // a new response (100-continue, ...): forget earlier headers
    a->etag.clear();
    a->length = a->total = UINT64_MAX;
  } else if (auto v = value("link:")) {
    a->link = std::string(*v);
  } else if (auto v = value("etag:")) {
    a->etag = std::string(*v);
  } else if (auto v = value("content-length:")) {
    a->length = std::strtoull(std::string(*v).c_str(), nullptr, 10);
  } else if (auto v = value("content-range:")) {
    size_t slash = v->rfind('/');
    if (slash != std::string_view::npos && v->substr(slash + 1) != "*") {
      a->total = std::strtoull(std::string(v->substr(slash + 1)).c_str(), nullptr, 10);
    }
  }
  return size * n;
}

size_t OnBody(char* buf, size_t size, size_t n, void* user) {
  auto* a = static_cast<Attempt*>(user);
  Request& r = *a->req;
  size_t len = size * n;
  if (a->first_body) {
    a->first_body = false;
    long code = 0;
    curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200 && code != 206) {  // an error body: its start kept, for its code
      a->error_body.append(buf, std::min<size_t>(len, 4096));
      return len;
    }
    if (code == 200 && a->ranged) a->skip = r.offset + r.got;  // the server ignored Range
    if (r.pin_etag && !r.pin_etag->empty() && !a->etag.empty() && a->etag != *r.pin_etag) return 0;
  }
  long code = 0;
  curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200 && code != 206) {
    if (a->error_body.size() < 4096) a->error_body.append(buf, std::min<size_t>(len, 4096 - a->error_body.size()));
    return len;
  }
  const char* p = buf;
  size_t left = len;
  if (a->skip > 0) {
    size_t s = static_cast<size_t>(std::min<uint64_t>(a->skip, left));
    a->skip -= s;
    p += s;
    left -= s;
  }
  if (r.whole) {
    r.whole->append(p, left);
    r.got += left;
  } else if (left > 0) {
    size_t room = r.out.size() - static_cast<size_t>(r.got);
    size_t take = std::min(room, left);
    std::memcpy(r.out.data() + r.got, p, take);
    r.got += take;
    if (take < left) {
      a->overflow = true;
      return 0;  // stop: everything asked for is here
    }
  }
  GlobalIoCounters().bytes.fetch_add(left, std::memory_order_relaxed);
  return len;
}

bool Retryable(long code) { return code == 408 || code == 429 || code >= 500; }

// Transport errors that no retry mends: the request itself is malformed or
// the peer's certificate is refused. Everything else (resets, timeouts,
// stalls, refused connections, names that stop resolving) is transient.
bool PermanentCurlError(CURLcode rc) {
  switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_LOGIN_DENIED:
      return true;
    default:
      return false;
  }
}

// A fault before any answer from the host: it may never have existed.
bool NoAnswer(CURLcode rc) { return rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT; }

// A refusal that fresh credentials may cure: the store's code for an expired
// or unknown session token (a HEAD's answer has no body to say so).
bool TokenRefused(long code, const Attempt& a, bool head, const AwsCredentials& used) {
  if (code != 400 && code != 403) return false;
  if (head) return !used.token.empty();
  for (const char* what : {"ExpiredToken", "InvalidToken", "RequestExpired", "TokenRefreshRequired"}) {
    if (a.error_body.find(what) != std::string::npos) return true;
  }
  return false;
}

// libcurl calls it while a transfer runs (at least once a second, also
// while the server sends nothing): non-zero aborts the transfer.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const Cancellation*>(user)->cancelled() ? 1 : 0;
}

// What a request asked for, for messages: "GET bytes=0-6052".
std::string Describe(const Request& req, bool ranged, uint64_t want) {
  if (req.head) return "HEAD";
  if (!ranged) return "GET";
  return "GET bytes=" + std::to_string(req.offset) + "-" + std::to_string(req.offset + want - 1);
}

// Sends req until it completes, a permanent answer, or its retry deadline.
Status Send(const HttpTarget& t, const IoOptions& o, Request& req) {
  IoCounters& counters = GlobalIoCounters();
  const auto start = Clock::now();
  const bool ranged = !req.head && !req.whole;
  const uint64_t want = ranged ? req.out.size() : 0;
  // Where the request goes now: a redirect moves it; credentials and the
  // target's headers go to the target's own origin only.
  std::string at = req.start.empty() ? t.url : req.start;
  const std::string home = UrlOrigin(t.url);
  int hops = 0;
  std::string origin = UrlOrigin(at);
  const std::string name = RedactUrl(t.name);
  auto label = [&] { return at == t.url ? name : name + " (at " + RedactUrl(at) + ")"; };
  std::string last;  // the last fault, for the error message
  long last_code = 0;
  thread_local std::mt19937_64 rng(std::random_device{}());
  // The request's budget is time: an outage shorter than the deadline costs
  // the wait, not the run. A host that never answered gets a short one.
  const auto deadline_of = [&](bool first_contact) {
    const int ms = first_contact ? std::min(o.retry_deadline_ms, kFirstContactDeadlineMs) : o.retry_deadline_ms;
    return start + std::chrono::milliseconds(std::max(0, ms));
  };
  bool faulted = false;  // counted in IoCounters::retrying until the request ends
  struct EndGuard {
    bool* faulted;
    ~EndGuard() {
      if (*faulted) OutageRequestEnded();
    }
  } end_guard{&faulted};
  int token_retries = 0;  // refusals of expired credentials, retried at once (2 at most)
  // Work that was dropped (io/cancel.h): no attempt after the cancel, a
  // back-off that ends at it, a transfer aborted by it.
  Cancellation* cancel = CurrentCancellation();
  auto cancelled = [&](int attempt) {
    return Cancelled(label() + ": read cancelled after " + std::to_string(attempt - 1) +
                     " attempts (the loader dropped the work it was for)");
  };
  auto give_up = [&](int attempt, const std::string& why) {
    counters.failures.fetch_add(1, std::memory_order_relaxed);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    char el[32];
    std::snprintf(el, sizeof el, "%.2f s", secs);
    return IoError(label() + ": " + Describe(req, ranged, want) + " failed after " + std::to_string(attempt) +
                   " attempts in " + el + "; last status " +
                   (last_code ? "HTTP " + std::to_string(last_code) : "none") + ": " + last +
                   (ranged ? "; " + std::to_string(req.got) + " of " + std::to_string(want) + " bytes received" : "") +
                   "; " + why);
  };
  auto deadline_spent = [&] {
    if (!EverReached(origin)) {
      return "the host never answered within " +
             std::to_string(std::min(o.retry_deadline_ms, kFirstContactDeadlineMs) / 1000) +
             " s (a wrong name or port?)";
    }
    char limit[48];
    std::snprintf(limit, sizeof limit, "retry deadline of %.1f s spent", o.retry_deadline_ms / 1000.0);
    return std::string(limit) + " (retry_deadline_s)";
  };
  bool refreshed = false;  // the last attempt was refused for its token: no back-off
  for (int attempt = 1;; ++attempt) {
    if (cancel && cancel->cancelled()) return cancelled(attempt);
    origin = UrlOrigin(at);
    const auto deadline = deadline_of(!EverReached(origin));
    if (attempt > 1 && !refreshed) {
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      std::chrono::milliseconds pause(
          BackoffMs(attempt - 1, static_cast<uint64_t>(o.backoff_ms), static_cast<uint64_t>(o.backoff_max_ms), unit(rng)));
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= std::chrono::milliseconds(0)) return give_up(attempt - 1, deadline_spent());
      pause = std::min(pause, left);
      if (cancel) {
        if (!cancel->SleepFor(pause)) return cancelled(attempt);
      } else {
        std::this_thread::sleep_for(pause);
      }
      counters.retries.fetch_add(1, std::memory_order_relaxed);
    }
    // One attempt may not outlast the request's deadline (at least a second,
    // so the last attempt before it is a real one).
    const long left_ms = std::max<long>(
        1000, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    const long attempt_ms = std::min<long>(o.timeout_ms, left_ms);
    refreshed = false;
    const bool own = origin == home;  // a redirect elsewhere gets no credentials
    const bool sign = own && !t.sigv4.empty();
    AwsCredentials creds;
    std::string userpwd = t.userpwd, session_token = t.token;
    if (sign && t.credentials) {
      auto c = t.credentials->Get();
      if (!c.ok()) return c.status().WithContext(name + ": AWS credentials");
      creds = std::move(c).value();
      userpwd = creds.key + ":" + creds.secret;
      session_token = creds.token;
    }
    CURL* h = Handle();
    Attempt a;
    a.req = &req;
    a.h = h;
    a.ranged = ranged;
    if (req.whole) req.whole->clear(), req.got = 0;  // a whole GET restarts from byte 0
    curl_slist* headers = nullptr;
    std::string range;
    if (ranged) {
      range = "Range: bytes=" + std::to_string(req.offset + req.got) + "-" + std::to_string(req.offset + want - 1);
      headers = curl_slist_append(headers, range.c_str());
    }
    std::string if_match;
    if (req.pin_etag && !req.pin_etag->empty() && !(req.moved && at == t.url)) {
      if_match = "If-Match: " + *req.pin_etag;
      headers = curl_slist_append(headers, if_match.c_str());
    }
    std::string token;
    if (sign) {
      // The SHA-256 of an empty payload: curl signs with it (GET/HEAD have no body).
      headers = curl_slist_append(
          headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
      if (!session_token.empty()) {
        token = "x-amz-security-token: " + session_token;
        headers = curl_slist_append(headers, token.c_str());
      }
    }
    if (own) {
      for (const std::string& line : t.headers) headers = curl_slist_append(headers, line.c_str());
    }
    curl_easy_setopt(h, CURLOPT_URL, at.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, attempt_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min<long>(attempt_ms, 10000));
    // A connection that delivers nothing for stall_ms is dead, whatever the
    // attempt's own limit: retry on a fresh one.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, std::max<long>(1, o.stall_ms / 1000));
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (req.head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (headers) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (sign) {
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, t.sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERPWD, userpwd.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    if (cancel) {
      curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
      curl_easy_setopt(h, CURLOPT_XFERINFODATA, cancel);
      curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }

    counters.requests.fetch_add(1, std::memory_order_relaxed);
    const auto t0 = Clock::now();
    CURLcode rc = curl_easy_perform(h);
    counters.RecordLatency(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count()));
    curl_slist_free_all(headers);
    if (rc == CURLE_ABORTED_BY_CALLBACK) return cancelled(attempt + 1);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    req.code = code;
    if (code != 0) {
      last_code = code;
      MarkReached(origin);
    }

    const bool ok_code = code == 200 || code == 206;
    if (ok_code && !a.etag.empty() && req.pin_etag && !req.pin_etag->empty() && a.etag != *req.pin_etag) {
      return DataLoss(label() + ": the object changed while being read (ETag " + a.etag + ", opened as " +
                      *req.pin_etag + "); not mixing two versions");
    }
    if (ok_code && a.total != UINT64_MAX && req.pin_size != UINT64_MAX && a.total != req.pin_size) {
      return DataLoss(label() + ": the object changed while being read (size " + std::to_string(a.total) +
                      ", opened as " + std::to_string(req.pin_size) + " bytes)");
    }
    if (code == 404) return NotFound(label() + ": not found (HTTP 404)");
    if (code == 412) {
      return DataLoss(label() + ": the object changed since it was opened (HTTP 412 on If-Match " +
                      (req.pin_etag ? *req.pin_etag : "") + ")");
    }
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && a.overflow)) {
      if (ok_code) {
        req.location = at;
        if (req.head) {
          req.etag = a.etag;
          req.length = a.length;
          NoteSuccess();
          return Status::Ok();
        }
        if (req.whole) {
          if (a.length == UINT64_MAX || req.got == a.length) {
            if (req.link) *req.link = a.link;
            NoteSuccess();
            return Status::Ok();
          }
          last = "short body: " + std::to_string(req.got) + " of " + std::to_string(a.length) + " bytes";
        } else if (req.got == want) {
          req.etag = a.etag;
          req.length = a.length;
          req.total = a.total;
          NoteSuccess();
          return Status::Ok();
        } else {
          last = "short body: " + std::to_string(req.got) + " of " + std::to_string(want) + " bytes";
        }
      } else if (code == 429 || code == 503) {
        counters.throttled.fetch_add(1, std::memory_order_relaxed);
        last = "HTTP " + std::to_string(code) + " (throttled)";
      } else if (Retryable(code)) {
        last = "HTTP " + std::to_string(code);
      } else if (IsRedirect(code)) {
        char* to = nullptr;
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &to);
        if (!to || !*to) {
          return IoError(label() + ": HTTP " + std::to_string(code) + (req.head ? " on HEAD" : " on GET") +
                         " without a Location (not retried)");
        }
        req.hops = ++hops;
        if (hops > kMaxRedirects) {
          return IoError(label() + ": more than " + std::to_string(kMaxRedirects) + " redirects (the last to " +
                         RedactUrl(to) + ")");
        }
        at = to;
        refreshed = true;  // the next request goes at once
        --attempt;         // a redirect is not a fault: the retry budget stays
        continue;
      } else if (sign && t.credentials && token_retries < 2 && TokenRefused(code, a, req.head, creds)) {
        t.credentials->Invalidate(creds);
        ++token_retries;
        refreshed = true;
        last = "HTTP " + std::to_string(code) + " (credentials refused as expired: " + creds.source + ")";
        --attempt;  // not a fault of the store: the retry budget stays
        continue;
      } else {
        std::string why;  // the store's error code, when its body names one
        if (size_t p = a.error_body.find("<Code>"); p != std::string::npos) {
          size_t e = a.error_body.find("</Code>", p);
          if (e != std::string::npos) why = " " + a.error_body.substr(p + 6, e - p - 6);
        }
        return IoError(label() + ": HTTP " + std::to_string(code) + why + (req.head ? " on HEAD" : " on GET") +
                       " (not retried)" + (sign && t.credentials ? "; signed with " + creds.source : ""));
      }
    } else if (PermanentCurlError(rc)) {
      return IoError(label() + ": " + Describe(req, ranged, want) + ": " + curl_easy_strerror(rc) + " (not retried)");
    } else {
      last = std::string(curl_easy_strerror(rc)) +
             (rc == CURLE_OPERATION_TIMEDOUT ? " (attempt limit " + std::to_string(attempt_ms) + " ms, or no byte for " +
                                                   std::to_string(o.stall_ms) + " ms)"
                                             : "");
      if (NoAnswer(rc) && !EverReached(origin)) last += "; this host has not answered this process yet";
    }
    NoteFault(last + " on " + Describe(req, ranged, want) + " " + label(), !faulted,
              std::chrono::duration<double>(deadline_of(!EverReached(origin)) - start).count());
    faulted = true;
    if (o.attempts > 0 && attempt >= o.attempts) {
      return give_up(attempt, "attempt cap " + std::to_string(o.attempts) + " reached");
    }
    if (Clock::now() >= deadline_of(!EverReached(origin))) return give_up(attempt, deadline_spent());
  }
}

}  // namespace

HttpTarget HttpTargetFor(const std::string& url, const IoOptions& options) {
  HttpTarget t;
  t.url = url;
  t.name = url;
  for (const auto& [key, value] : options.http_headers) t.headers.push_back(key + ": " + value);
  return t;
}

HttpReader::HttpReader(HttpTarget target, const IoOptions& options)
    : target_(std::move(target)), options_(options) {
  target_.name = RedactUrl(target_.name);
}

// The version of each object first seen in this process, and where it was
// found last (a redirect's final location): every reader of the URL, a
// re-opened one too, reads there.
struct Pin {
  uint64_t size = 0;
  std::string etag;
  std::string location;  // "" : the URL itself
  Clock::time_point found;
  bool moved = false;  // the URL answered with a redirect
};
static std::mutex& PinsMu() {
  static std::mutex mu;
  return mu;
}
static std::map<std::string, Pin>& Pins() {  // guarded by PinsMu()
  static std::map<std::string, Pin> pins;
  return pins;
}

std::string HttpReader::Where(bool* moved) const {
  std::lock_guard lock(PinsMu());
  auto it = Pins().find(target_.url);
  if (it == Pins().end()) return "";
  Pin& pin = it->second;
  if (!pin.location.empty() && Clock::now() - pin.found > std::chrono::seconds(kLocationTtlS)) {
    pin.location.clear();  // expired: the next read resolves it again
  }
  *moved = pin.moved;
  return pin.location;
}

void HttpReader::Moved(const std::string& from, const std::string& to) const {
  std::lock_guard lock(PinsMu());
  auto it = Pins().find(target_.url);
  if (it == Pins().end()) return;
  Pin& pin = it->second;
  if (pin.location != from && !pin.location.empty()) return;  // another read moved it already
  pin.location = to == target_.url ? "" : to;
  pin.found = Clock::now();
  pin.moved = pin.moved || !pin.location.empty();
}

Result<std::unique_ptr<HttpReader>> HttpReader::Open(HttpTarget target, const IoOptions& options) {
  std::unique_ptr<HttpReader> r(new HttpReader(std::move(target), options));
  {
    // Opened before in this process: its size and ETag are pinned already, and
    // every GET carries If-Match (a changed object is a 412: DataLoss), so a
    // re-open (the loader after the index load, a shard evicted and opened
    // again) costs no HEAD round trip.
    std::lock_guard lock(PinsMu());
    auto it = Pins().find(r->target_.url);
    if (it != Pins().end()) {
      r->size_ = it->second.size;
      r->etag_ = it->second.etag;
      return r;
    }
  }
  Request head;
  head.head = true;
  Status found = Send(r->target_, r->options_, head);
  if (!found.ok() && head.hops > 0 && (head.code == 403 || head.code == 405)) {
    // A redirect's target signed for GET only (an S3 presigned URL, as a
    // CDN hands out) refuses a HEAD: one byte by ranged GET says as much.
    uint8_t byte = 0;
    Request probe;
    probe.out = {&byte, 1};
    found = Send(r->target_, r->options_, probe);
    head.etag = probe.etag;
    head.location = probe.location;
    head.length = probe.total != UINT64_MAX ? probe.total : probe.length;  // a 200: the whole length
  }
  STOKER_RETURN_IF_ERROR(found);
  if (head.length == UINT64_MAX) return IoError(r->target_.name + ": HEAD gave no Content-Length");
  r->size_ = head.length;
  r->etag_ = head.etag;
  if (r->etag_.starts_with("W/")) r->etag_.clear();  // a weak ETag cannot pin bytes
  // The version first seen in this process stays pinned: a shard re-opened
  // later (evicted from ShardFiles, or opened by the loader after its index
  // was built) must be the object the index describes.
  std::lock_guard lock(PinsMu());
  auto [it, fresh] = Pins().try_emplace(r->target_.url, Pin{r->size_, r->etag_, "", Clock::now()});
  if (!fresh && (it->second.size != r->size_ || it->second.etag != r->etag_)) {
    return DataLoss(r->target_.name + ": the object changed since this process first opened it (size " +
                    std::to_string(it->second.size) + " -> " + std::to_string(r->size_) + ", ETag " +
                    it->second.etag + " -> " + r->etag_ + "); not mixing two versions");
  }
  if (fresh || it->second.location.empty()) {
    it->second.location = head.location == r->target_.url ? "" : head.location;
    it->second.found = Clock::now();
    it->second.moved = it->second.moved || !it->second.location.empty();
  }
  return r;
}

Result<size_t> HttpReader::ReadAt(uint64_t offset, std::span<uint8_t> out) const {
  if (offset >= size_ || out.empty()) return size_t{0};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), size_ - offset));
  bool moved = false;
  const std::string where = Where(&moved);
  auto read = [&](const std::string& start) {
    Request req;
    req.offset = offset;
    req.out = out.subspan(0, n);
    req.pin_etag = &etag_;
    req.pin_size = size_;
    req.start = start;
    req.moved = moved;
    Status st = Send(target_, options_, req);
    return std::make_pair(std::move(st), std::move(req));
  };
  auto [st, req] = read(where);
  // A remembered location that refuses (a signed link expired, a CDN node
  // gone): resolved again from the object's own URL, once.
  if (!st.ok() && !where.empty() &&
      (req.code == 401 || req.code == 403 || req.code == 404 || req.code == 410)) {
    std::tie(st, req) = read("");
  }
  STOKER_RETURN_IF_ERROR(st);
  if (req.location != (where.empty() ? target_.url : where)) Moved(where, req.location);
  return n;
}

Result<std::string> HttpGetWhole(const HttpTarget& target, const IoOptions& options, std::string* link) {
  std::string body;
  Request req;
  req.whole = &body;
  req.link = link;
  STOKER_RETURN_IF_ERROR(Send(target, options, req));
  return body;
}

}  // namespace stoker
