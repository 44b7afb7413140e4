// observe/clock.h — one monotonic clock for every span and counter.
#pragma once

#include <chrono>
#include <cstdint>

namespace stoker {

inline uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace stoker
