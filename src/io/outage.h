// io/outage.h — the process's view of a remote store that stops answering:
// the gauges behind report() and slow-batch causes (IoCounters::retrying,
// faulting_since_ns, LastFault) and the log lines a user sees while it lasts.
//
// An outage begins with the first fault after a success and ends with the
// next success. Lines go to stderr, at most one every kLogEveryS seconds
// while it lasts:
//   stoker: remote fault, retrying for up to 120 s: HTTP 503 on GET http://h/a.tar bytes=0-99
//   stoker: remote storage failing for 20 s: 4 requests retrying; last: HTTP 503 on GET ...
//   stoker: remote storage answers again after 61.3 s (212 retries)
// A host that never answered this process (a typo, a wrong port) is told
// apart from one that stopped answering: requests to it get a short budget
// (kFirstContactDeadlineMs), since waiting minutes for a name that never
// resolved helps nobody.
// Thread-safety: every function from any thread.
#pragma once

#include <string>

namespace stoker {

inline constexpr int kFirstContactDeadlineMs = 10000;
inline constexpr double kLogEveryS = 10.0;

// "scheme://host:port" of a URL: what "reached" is remembered by.
std::string UrlOrigin(const std::string& url);
bool EverReached(const std::string& origin);
void MarkReached(const std::string& origin);

// A request's attempt failed with `what`; `first` on its first fault (it
// now counts as retrying until OutageRequestEnded). `deadline_s`: its budget.
void NoteFault(const std::string& what, bool first, double deadline_s);
// A request succeeded (ends an outage).
void NoteSuccess();
// A request that had faulted ended (success or not).
void OutageRequestEnded();

}  // namespace stoker
