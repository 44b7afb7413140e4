#include "observe/histogram.h"

namespace stoker {

double LatencyHistogram::Percentile(const std::vector<uint64_t>& counts, double q) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return 0.0;
  const double target = q * static_cast<double>(total);
  double seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    if (seen + static_cast<double>(counts[i]) >= target) {
      double lo = i == 0 ? 0.0 : BucketUpperSeconds(static_cast<int>(i) - 1);
      double hi = BucketUpperSeconds(static_cast<int>(i));
      double frac = (target - seen) / static_cast<double>(counts[i]);
      return lo + (hi - lo) * frac;
    }
    seen += static_cast<double>(counts[i]);
  }
  return BucketUpperSeconds(static_cast<int>(counts.size()) - 1);
}

}  // namespace stoker
