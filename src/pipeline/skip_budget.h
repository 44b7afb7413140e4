// pipeline/skip_budget.h — on_error=skip's budget, for both modes' skips
// (skip_refill.h, stream_skips.h): more than max_skips skipped samples, or a
// skipped fraction above max_skip_fraction once skip_probation samples were
// seen, turns a systemic fault (a bad mount, a wrong field) into an error
// naming the budget and the last cause, instead of a run of skips.
#pragma once

#include <string>

#include "stoker/loader.h"

namespace stoker {

Status CheckSkipBudget(const LoaderOptions& options, const SkipCounts& counts, const std::string& last_cause);

}  // namespace stoker
