// pipeline/direct_arrays.h — array members read straight into their batch slots.
//
// An .npy member, and each entry of a stored .npz, is a short header followed
// by the array's bytes exactly as its slot holds them (when native byte order
// and C order). Knowing where those bytes lie in a sample's byte range, the
// reader preads them into the slot itself: one copy from the page cache, no
// staging buffer, no second memcpy. Where they lie is predicted before the
// read and verified by the decoder once the headers (read into the staging
// buffer as usual) are parsed:
//   - .npy: the data is the member's last sample_bytes bytes;
//   - .npz: a member of the probe's size holds its arrays at the probe's
//     offsets (np.savez lays out equal names and shapes identically), and the
//     entry's CRC-32 is checked over the header in staging plus the slot.
// A wrong prediction never changes a result: the slot then holds the file's
// bytes of that range, which go back into the staging buffer (RestoreDirect)
// before the ordinary decode runs.
// Thread-safety: free functions over immutable inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "formats/sample_index.h"
#include "pipeline/batch_layout.h"

namespace stoker {

struct DirectRange {
  uint64_t offset = 0;  // in the sample's byte range: bytes [entry.begin + offset, + size)
  uint64_t size = 0;    // the slot's sample_bytes
  size_t array = 0;     // index in BatchLayout::arrays
  size_t field = 0;     // index in BatchLayout::fields
};

// Replaces *out with the predicted ranges of `entry`, in ascending offset.
void PredictDirect(const BatchLayout& layout, SampleView entry, std::vector<DirectRange>* out);

// True when the field's predicted ranges hold exactly what the ordinary decode
// would write into its slots. `member` is the field's bytes in the staging
// buffer (stale where the ranges lie); `ranges` are this field's only.
bool VerifyDirect(const BatchLayout& layout, const FieldLayout& field, std::span<const uint8_t> member,
                  uint64_t member_offset, std::span<const DirectRange> ranges, uint8_t* batch_buffer, int slot);

// Copies the ranges' bytes from their slots back into the staging buffer `sample`.
void RestoreDirect(const BatchLayout& layout, std::span<const DirectRange> ranges, const uint8_t* batch_buffer,
                   int slot, std::span<uint8_t> sample);

}  // namespace stoker
