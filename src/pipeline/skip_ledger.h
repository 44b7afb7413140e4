// pipeline/skip_ledger.h — on_error=skip's record, for both modes' skips
// (skip_refill.h, stream_skips.h): the counts, the last cause, the log of
// skips not yet taken, and the budget. More than max_skips skipped samples,
// or a skipped fraction above max_skip_fraction once skip_probation samples
// were seen, turns a systemic fault (a bad mount, a wrong field) into an
// error naming the budget and the last cause, instead of a run of skips.
// Thread-safety: one thread (the loader's consumer).
#pragma once

#include <string>
#include <vector>

#include "stoker/loader.h"

namespace stoker {

Status CheckSkipBudget(const LoaderOptions& options, const SkipCounts& counts, const std::string& last_cause);

class SkipLedger {
 public:
  // Counts one more skipped sample, `cause` the last, and logs `record`
  // with it (the newest 10,000 kept until taken).
  void Skip(SkipRecord record, std::string cause);
  Status CheckBudget(const LoaderOptions& options) const { return CheckSkipBudget(options, counts, last_cause_); }
  const std::string& last_cause() const { return last_cause_; }
  std::vector<SkipRecord> TakeLog();

  SkipCounts counts;  // the caller counts seen and refilled; Skip counts skipped

 private:
  std::string last_cause_;
  std::vector<SkipRecord> log_;  // not yet taken
};

}  // namespace stoker
