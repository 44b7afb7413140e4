// pipeline/batch_layout.h — where each output array of a batch lives inside
// one pooled buffer.
//
// Every field becomes one or more arrays of fixed per-sample shape; each array
// is a [batch_size, ...] region of the buffer, 64-byte aligned, and sample i
// of the batch writes its part at region + i * sample_bytes. Collate is then
// free: a batch is complete when its last sample is written.
// Shapes of .npy/.npz fields are not in the spec: they are probed from the
// first sample, and every later sample must match (else a DataLoss error).
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "formats/sample_index.h"
#include "stoker/loader.h"

namespace stoker {

struct ArraySlot {
  std::string name;                  // "jpg", "features.npz/embeddings", "__index__"
  DType dtype = DType::kU8;
  std::vector<int64_t> sample_shape;
  size_t sample_bytes = 0;
  size_t offset = 0;                 // of the [batch_size, ...] region in the buffer
  // Slot `slot`'s sample in a batch buffer laid out so.
  uint8_t* At(uint8_t* batch_buffer, int slot) const {
    return batch_buffer + offset + sample_bytes * static_cast<size_t>(slot);
  }
  const uint8_t* At(const uint8_t* batch_buffer, int slot) const {
    return batch_buffer + offset + sample_bytes * static_cast<size_t>(slot);
  }
};

struct FieldLayout {
  FieldSpec spec;
  // Its member is gzip data, inflated before decode (formats/gzip_member.h):
  // the field ends in ".gz". No direct placement then (direct_arrays.h).
  bool gzip = false;
  std::vector<size_t> arrays;        // indices into BatchLayout::arrays, in the order of `names`
  std::vector<std::string> names;    // npz: the member arrays, without ".npy"
  // npz whose arrays the probe stored plainly (no deflate, native order): the
  // probe member's size and where each array's data began in it, in the order
  // of `names`. A later member of that size is predicted to hold its arrays at
  // the same offsets (np.savez lays out equal names and shapes identically), so
  // the reader can place them straight into their slots (direct_arrays.h).
  // Empty when any array was deflated or needs conversion.
  uint64_t probe_member_size = 0;
  std::vector<uint64_t> probe_data_offsets;
};

struct BatchLayout {
  int batch_size = 0;
  std::vector<ArraySlot> arrays;
  std::vector<FieldLayout> fields;
  size_t index_array = 0;            // the "__index__" int64 array: global sample ids
  size_t buffer_bytes = 0;
};

// `probe` is the bytes of one sample (`entry`'s: its [begin, end), or its
// members' data when packed) used to learn array shapes; `where` names it in
// messages.
Result<BatchLayout> MakeBatchLayout(const std::vector<FieldSpec>& fields, int batch_size, SampleView entry,
                                    std::span<const uint8_t> probe, const std::string& where);

// Adds arrays of the same kind (a user map's outputs, pipeline/sample_map.h)
// after the layout's own and lays the buffer out again. Names must be new.
Status AppendArrays(BatchLayout& layout, std::vector<ArraySlot> extra);

// The most bytes a ".gz" member of this field may inflate to: max_bytes for
// the fields that have one, else kGzipMemberDefaultLimit.
size_t GzipMemberLimit(const FieldSpec& spec);

// A token batch: "tokens" int64 [batch_size, sample_tokens], for a blend
// "dataset_id" int64 [batch_size] (BlendedDataset's dataset_id: the index of
// each sample's dataset in the blend), then "__index__".
BatchLayout MakeTokenLayout(int sample_tokens, int batch_size, bool blend);

}  // namespace stoker
