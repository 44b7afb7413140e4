// io/outage.cc — see outage.h.
#include "io/outage.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>

#include "io/reader.h"

namespace stoker {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::mutex mu;                  // guards reached and last_log_ns
std::set<std::string> reached;  // origins that answered this process
int64_t last_log_ns = 0;
uint64_t retries_at_start = 0;

// True (and the clock reset) when a line may be written now.
bool LogDue(int64_t now) {  // REQUIRES mu
  if (last_log_ns != 0 && now - last_log_ns < static_cast<int64_t>(kLogEveryS * 1e9)) return false;
  last_log_ns = now;
  return true;
}

}  // namespace

std::string UrlOrigin(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t end = url.find_first_of("/?#", scheme + 3);
  return url.substr(0, end);
}

bool EverReached(const std::string& origin) {
  std::lock_guard lock(mu);
  return reached.count(origin) > 0;
}

void MarkReached(const std::string& origin) {
  std::lock_guard lock(mu);
  reached.insert(origin);
}

void NoteFault(const std::string& what, bool first, double deadline_s) {
  IoCounters& c = GlobalIoCounters();
  c.SetLastFault(what);
  if (first) c.retrying.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = NowNs();
  int64_t expected = 0;
  const bool began = c.faulting_since_ns.compare_exchange_strong(expected, now, std::memory_order_relaxed);
  std::lock_guard lock(mu);
  if (began) retries_at_start = c.retries.load(std::memory_order_relaxed);
  if (!LogDue(now)) return;
  if (began) {
    std::fprintf(stderr, "stoker: remote fault, retrying for up to %.0f s: %s\n", deadline_s, what.c_str());
  } else {
    std::fprintf(stderr, "stoker: remote storage failing for %.0f s: %lld requests retrying; last: %s\n",
                 c.OutageSeconds(), static_cast<long long>(c.retrying.load(std::memory_order_relaxed)),
                 what.c_str());
  }
}

void NoteSuccess() {
  IoCounters& c = GlobalIoCounters();
  if (c.faulting_since_ns.load(std::memory_order_relaxed) == 0) return;
  const int64_t since = c.faulting_since_ns.exchange(0, std::memory_order_relaxed);
  if (since == 0) return;
  const int64_t ns = std::max<int64_t>(0, NowNs() - since);
  c.outage_ns_ended.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  const double secs = static_cast<double>(ns) / 1e9;
  std::lock_guard lock(mu);
  // A lone retried request is routine; a fault that lasted is worth a line.
  if (secs >= 1.0) {
    std::fprintf(stderr, "stoker: remote storage answers again after %.1f s (%llu retries)\n", secs,
                 static_cast<unsigned long long>(c.retries.load(std::memory_order_relaxed) - retries_at_start));
  }
}

void OutageRequestEnded() { GlobalIoCounters().retrying.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace stoker
