// pipeline/shuffle_buffer.h — the stream mode's bounded shuffle (webdataset's
// shuffle(bufsize)): samples enter from the stream; once `capacity` are held,
// each new one lets out one drawn uniformly from the buffer with a seeded
// RNG. Capacity 1 is stream order. At the end of each pass the buffer is
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

template <typename T>
class ShuffleBuffer {
 public:
  ShuffleBuffer(size_t capacity, uint64_t seed) : capacity_(capacity < 1 ? 1 : capacity), rng_(seed) {
    items_.reserve(capacity_);
  }

  // A pass begins: the buffer is empty (drained) and draws from `seed` on.
  void Reseed(uint64_t seed) { rng_ = SplitMix64(seed); }

  // Adds one sample; once full, returns the one let out.
  std::optional<T> Push(T item) {
    items_.push_back(std::move(item));
    if (items_.size() < capacity_) return std::nullopt;
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
  SplitMix64 rng_;
  std::vector<T> items_;
};

}  // namespace stoker
