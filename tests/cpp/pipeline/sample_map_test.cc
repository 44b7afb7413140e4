// sample_map: a C++ SampleMap, as a user of the C++ API writes one. The probe
// adds its new array to the layout (relaid, __index__ kept); SampleDecoder runs
// it after the fields are decoded, with the sample's seed, and times it; its
// failure is the sample's, named by shard and key.
#include "pipeline/map_probe.h"
#include "pipeline/sample_map.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "formats/npy.h"
#include "pipeline/sample_decoder.h"

namespace stoker {
namespace {

std::vector<uint8_t> Floats(int n, float base) {
  std::vector<uint8_t> out(n * sizeof(float));
  for (int i = 0; i < n; ++i) {
    float v = base + static_cast<float>(i);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof v);
  }
  return out;
}

struct Sample {
  std::vector<uint8_t> bytes;
  SampleEntry entry;
};

Sample Make(const std::string& key, float base) {
  Sample s;
  s.bytes = EncodeNpy(DType::kF32, {2, 3}, Floats(6, base));
  s.entry.key = key;
  s.entry.begin = 0;
  s.entry.members.push_back({"x.npy", key + ".x.npy", 0, s.bytes.size()});
  s.entry.end = s.bytes.size();
  return s;
}

const ArraySlot& Named(const BatchLayout& layout, const std::string& name) {
  for (const ArraySlot& a : layout.arrays)
    if (a.name == name) return a;
  ADD_FAILURE() << "no array " << name;
  return layout.arrays[0];
}

// Doubles x in place; adds "sum" (float32 scalar) and "seed" (uint64).
class DoubleAndSum : public SampleMap {
 public:
  Result<std::vector<MapArray>> Probe(const MapContext&, uint8_t*, uint64_t) override {
    return std::vector<MapArray>{{"sum", DType::kF32, {}}, {"seed", DType::kU64, {}}};
  }
  Status Apply(const MapContext& ctx, uint8_t* base, int slot, uint64_t seed) override {
    if (ctx.key == "bad") return DataLoss("cannot map this one");
    float* x = reinterpret_cast<float*>(Named(ctx.layout, "x.npy").At(base, slot));
    float sum = 0;
    for (int i = 0; i < 6; ++i) sum += (x[i] *= 2);
    std::memcpy(Named(ctx.layout, "sum").At(base, slot), &sum, sizeof sum);
    std::memcpy(Named(ctx.layout, "seed").At(base, slot), &seed, sizeof seed);
    return Status::Ok();
  }
};

TEST(SampleMapTest, ProbeAddsTheMapsArraysAndDecodeRunsIt) {
  const Sample probe = Make("p", 0);
  auto layout = MakeBatchLayout({NpyField("x.npy")}, 3, probe.entry, probe.bytes, "a.tar");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  const size_t before = layout->arrays.size();
  DoubleAndSum map;
  ASSERT_TRUE(ProbeSampleMap(map, {NpyField("x.npy")}, probe.entry, probe.bytes, "a.tar", 1, &*layout).ok());
  ASSERT_EQ(layout->arrays.size(), before + 2);
  EXPECT_EQ(layout->arrays[layout->index_array].name, "__index__");
  // Regions do not overlap and the buffer holds them all.
  for (size_t i = 1; i < layout->arrays.size(); ++i) {
    const ArraySlot& prev = layout->arrays[i - 1];
    EXPECT_GE(layout->arrays[i].offset, prev.offset + prev.sample_bytes * 3);
  }
  const ArraySlot& last = layout->arrays.back();
  EXPECT_GE(layout->buffer_bytes, last.offset + last.sample_bytes * 3);

  std::vector<uint8_t> buffer(layout->buffer_bytes);
  SampleDecoder decoder(&*layout, nullptr, &map);
  Sample s = Make("k", 10);
  ASSERT_TRUE(decoder.Decode("a.tar", s.entry, s.bytes, buffer.data(), 1, 42).ok());
  EXPECT_GT(decoder.map_end_ns(), 0u);
  EXPECT_GE(decoder.map_end_ns(), decoder.map_begin_ns());
  const float* x = reinterpret_cast<const float*>(Named(*layout, "x.npy").At(buffer.data(), 1));
  float want_sum = 0;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(x[i], 2 * (10.0f + i));
    want_sum += x[i];
  }
  float sum = 0;
  std::memcpy(&sum, Named(*layout, "sum").At(buffer.data(), 1), sizeof sum);
  EXPECT_EQ(sum, want_sum);
  uint64_t seed = 0;
  std::memcpy(&seed, Named(*layout, "seed").At(buffer.data(), 1), sizeof seed);
  EXPECT_EQ(seed, 42u);
}

TEST(SampleMapTest, AMapsFailureIsTheSamplesNamedError) {
  const Sample probe = Make("p", 0);
  auto layout = MakeBatchLayout({NpyField("x.npy")}, 2, probe.entry, probe.bytes, "a.tar");
  ASSERT_TRUE(layout.ok());
  DoubleAndSum map;
  ASSERT_TRUE(ProbeSampleMap(map, {NpyField("x.npy")}, probe.entry, probe.bytes, "a.tar", 1, &*layout).ok());
  std::vector<uint8_t> buffer(layout->buffer_bytes);
  SampleDecoder decoder(&*layout, nullptr, &map);
  Sample s = Make("bad", 1);
  Status st = decoder.Decode("a.tar", s.entry, s.bytes, buffer.data(), 0, 7);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("a.tar: sample 'bad'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cannot map this one"), std::string::npos) << st.message();
}

TEST(SampleMapTest, ANameTheLayoutHasIsRefused) {
  BatchLayout layout;
  layout.batch_size = 2;
  ArraySlot a;
  a.name = "x";
  ASSERT_TRUE(AppendArrays(layout, {a}).ok());
  EXPECT_FALSE(AppendArrays(layout, {a}).ok());
}

}  // namespace
}  // namespace stoker
