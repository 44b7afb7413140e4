// pipeline/skip_ledger.cc — see skip_ledger.h.
#include "pipeline/skip_ledger.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace stoker {

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status CheckSkipBudget(const LoaderOptions& o, const SkipCounts& counts, const std::string& last_cause) {
  if (o.max_skips > 0 && counts.skipped > o.max_skips) {
    return DataLoss("on_error='skip' budget exceeded: " + std::to_string(counts.skipped) +
                    " samples skipped, more than max_skips=" + std::to_string(o.max_skips) + "; the last: " +
                    last_cause);
  }
  if (o.max_skip_fraction > 0 && counts.seen >= std::max<int64_t>(1, o.skip_probation) &&
      static_cast<double>(counts.skipped) > o.max_skip_fraction * static_cast<double>(counts.seen)) {
    return DataLoss("on_error='skip' budget exceeded: " + std::to_string(counts.skipped) + " of " +
                    std::to_string(counts.seen) + " samples skipped, more than max_skip_fraction=" +
                    Num(o.max_skip_fraction) + " (after skip_probation=" + std::to_string(o.skip_probation) +
                    "); the last: " + last_cause);
  }
  return Status::Ok();
}

void SkipLedger::Skip(SkipRecord record, std::string cause) {
  ++counts.skipped;
  last_cause_ = std::move(cause);
  record.cause = last_cause_;
  log_.push_back(std::move(record));
  if (log_.size() > 10000) log_.erase(log_.begin());  // nobody takes them: keep the newest
}

std::vector<SkipRecord> SkipLedger::TakeLog() {
  std::vector<SkipRecord> out;
  out.swap(log_);
  return out;
}

}  // namespace stoker
