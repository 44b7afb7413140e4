// pipeline/shuffle_buffer.h — the stream mode's bounded shuffle (webdataset's
// shuffle(bufsize, initial)): samples enter from the stream; once `capacity`
// are held, each new one lets out one drawn uniformly from the buffer with a
// seeded RNG. The first one out comes once kShuffleBufferInitial are held, and until the
// buffer is full every other sample in lets one out, so it grows by one per
// sample out (webdataset's ramp, initial=100): a pass's first batch waits on
// a few hundred samples rather than a full buffer, and holds that many.
// Capacity 1 is stream order. At the end of each pass the buffer is
// drained in random order (as webdataset's is when its source ends), so one
// pass of every rank together delivers every sample once. Each pass draws
// from its own seed (Reseed), so a pass's start, empty buffer and all, is a
// state known in full from the pass alone: a restore begins there.
// Thread-safety: single-threaded (the stream's producer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/random.h"

namespace stoker {

inline constexpr size_t kShuffleBufferInitial = 100;

// How many a buffer of `capacity` holds before its first sample out.
inline size_t ShuffleBufferInitial(size_t capacity) {
  return capacity < 1 ? 1 : (capacity < kShuffleBufferInitial ? capacity : kShuffleBufferInitial);
}

template <typename T>
class ShuffleBuffer {
 public:
  ShuffleBuffer(size_t capacity, uint64_t seed)
      : capacity_(capacity < 1 ? 1 : capacity), initial_(ShuffleBufferInitial(capacity)), rng_(seed) {}

  // A pass begins: the buffer is empty (drained) and draws from `seed` on.
  void Reseed(uint64_t seed) {
    rng_ = SplitMix64(seed);
    out_next_ = true;
  }

  // Adds one sample; returns the one let out, if any.
  std::optional<T> Push(T item) {
    items_.push_back(std::move(item));
    if (items_.size() < initial_) return std::nullopt;
    if (items_.size() < capacity_) {  // filling: one out for every two in
      const bool out = out_next_;
      out_next_ = !out_next_;
      if (!out) return std::nullopt;
    }
    const size_t k = static_cast<size_t>(rng_.Below(items_.size()));
    std::swap(items_[k], items_.back());
    return Take();
  }

  // One of the samples held, drawn at random (the pass's end); nullopt once empty.
  std::optional<T> Drain() {
    if (items_.empty()) return std::nullopt;
    const size_t k = static_cast<size_t>(rng_.Below(items_.size()));
    std::swap(items_[k], items_.back());
    return Take();
  }

 private:
  T Take() {
    T out = std::move(items_.back());
    items_.pop_back();
    return out;
  }

  size_t capacity_;
  size_t initial_;
  bool out_next_ = true;  // while filling: whether the next push lets one out
  SplitMix64 rng_;
  std::vector<T> items_;
};

}  // namespace stoker
