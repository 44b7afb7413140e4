// cli/progress.cc — see progress.h.
#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace stoker::cli {

Progress::Progress(std::string label, uint64_t total_items, uint64_t total_bytes, bool quiet)
    : label_(std::move(label)), total_items_(total_items), total_bytes_(total_bytes), quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0) {}

void Progress::Add(uint64_t items, uint64_t bytes) {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(mu_);
  items_ += items;
  bytes_ += bytes;
  const auto interval = tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(5000);
  if (Clock::now() - last_print_ >= interval) Print(false);
}

void Progress::Finish() {
  if (quiet_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  // Off a terminal a short command prints nothing: the summary on stdout says it all.
  if (tty_) Print(true);
}

void Progress::Print(bool final) {
  last_print_ = Clock::now();
  const double secs = std::chrono::duration<double>(last_print_ - start_).count();
  const double mb = bytes_ / 1e6;
  const double rate = secs > 0 ? mb / secs : 0;
  // The ETA follows bytes when their total is known (files differ in size), else items.
  double done = total_bytes_ ? double(bytes_) / total_bytes_ : total_items_ ? double(items_) / total_items_ : 0;
  char eta[32] = "?";
  if (done > 0) std::snprintf(eta, sizeof(eta), "%.0fs", secs * (1 - done) / done);
  char line[256];
  int n = std::snprintf(line, sizeof(line), "%s: %llu/%llu files  %.1f", label_.c_str(),
                        (unsigned long long)items_, (unsigned long long)total_items_, mb);
  if (total_bytes_) n += std::snprintf(line + n, sizeof(line) - n, "/%.1f", total_bytes_ / 1e6);
  std::snprintf(line + n, sizeof(line) - n, " MB  %.1f MB/s  %s %s", rate, final ? "took" : "ETA",
                final ? (std::to_string(int(secs + 0.5)) + "s").c_str() : eta);
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line, final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

}  // namespace stoker::cli
