// io/backoff.h — capped, jittered exponential backoff (pure; unit-tested).
// Delay before retry number `retry` (1 = the first retry): a uniform draw in
// [d/2, d] where d = min(cap, base * 2^(retry-1)); `unit` in [0, 1) is the
// random draw, so the function is deterministic given it.
// Thread-safety: pure function.
#pragma once

#include <algorithm>
#include <cstdint>

namespace stoker {

inline uint64_t BackoffMs(int retry, uint64_t base_ms, uint64_t cap_ms, double unit) {
  if (retry < 1) retry = 1;
  uint64_t d = base_ms;
  for (int i = 1; i < retry && d < cap_ms; ++i) d *= 2;
  d = std::min(d, cap_ms);
  return d / 2 + static_cast<uint64_t>(unit * static_cast<double>(d - d / 2));
}

}  // namespace stoker
