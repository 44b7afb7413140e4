// GPU decode's loader side, proven on CPU (pipeline/gpu_decode.h): with the
// late copy engine standing for the copy stream and the stand-in GPU decoder
// (device/gpu_decoder.h) for nvJPEG, decode=gpu gives the CPU path's batches
// byte for byte, in the same order, with the same crops and flips; what the
// GPU decoder refuses (progressive, CMYK) and what is not a JPEG decodes on
// the CPU and is counted by reason; a corrupt JPEG gets the CPU's error and
// the skip policy; decode=auto moves the split toward the faster side; a
// loader dropped with decodes in flight returns; device buffers stay within
// prefetch + 1; a hardware decoder that stops returning costs one bounded
// wait (device/hardware_batcher.h's watchdog), and every batch still arrives,
// exactly once, in order. The same in stream mode, whose engine after a
// sample's bytes is the indexed mode's: decode=gpu and auto give the host
// stream's batches, copies issued as batches complete, and a slot the skip
// rule repeats from a GPU-staged neighbour gets that neighbour's pixels.
// Runs under ThreadSanitizer (scripts/sanitize.sh).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "codecs/jpeg.h"
#include "codecs/libjpeg_encode.h"
#include "formats/tar.h"
#include "pipeline/drain_batches.h"
#include "stoker/loader.h"

namespace stoker {
namespace {

std::vector<uint8_t> Pixels(int w, int h, int channels, int seed) {
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * channels);
  for (size_t i = 0; i < v.size(); ++i) {
    const int x = static_cast<int>((i / channels) % w), y = static_cast<int>(i / channels / w);
    v[i] = static_cast<uint8_t>((x * (3 + seed % 5) + y * 2 + (i % channels) * 60 + seed * 17) & 0xff);
  }
  return v;
}

// kind per sample: 0 baseline 4:2:0, 1 baseline 4:4:4, 2 progressive, 3 CMYK, 4 truncated, 5 gray.
std::vector<uint8_t> Jpeg(int i, int kind) {
  const int w = 180 + (i % 7) * 13, h = 140 + (i % 5) * 11;
  switch (kind) {
    case 1:
      return *EncodeJpeg(Pixels(w, h, 3, i).data(), w, h, 3, 85, 444);
    case 2: {
      test_data::LibjpegLayout progressive;
      progressive.progressive = true;
      return test_data::EncodeWithLibjpeg(Pixels(w, h, 3, i), w, h, 3, progressive);
    }
    case 3:
      return test_data::EncodeWithFactors(Pixels(w, h, 4, i), w, h, JCS_CMYK, JCS_CMYK,
                                          {{1, 1}, {1, 1}, {1, 1}, {1, 1}});
    case 4: {
      std::vector<uint8_t> j = *EncodeJpeg(Pixels(w, h, 3, i).data(), w, h, 3, 90, 420);
      j.resize(j.size() / 2);
      return j;
    }
    case 5:
      return *EncodeJpeg(Pixels(w, h, 1, i).data(), w, h, 1, 90, 420);
    default:
      return *EncodeJpeg(Pixels(w, h, 3, i).data(), w, h, 3, 90, 420);
  }
}

// 3 shards x 16 samples "k<i>.jpg" + "k<i>.cls"; kinds[i] picks the JPEG (default baseline);
// kind -1: a good JPEG with a cls that is not a number.
std::string MakeShards(const std::map<int, int>& kinds = {}) {
  char tmpl[] = "/tmp/stoker-gpudec-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  for (int s = 0; s < 3; ++s) {
    auto w = TarWriter::Create(dir + "/s" + std::to_string(s) + ".tar");
    EXPECT_TRUE(w.ok());
    for (int i = s * 16; i < (s + 1) * 16; ++i) {
      auto it = kinds.find(i);
      const int kind = it == kinds.end() ? (i % 3 == 0 ? 1 : 0) : it->second;
      const std::vector<uint8_t> jpg = Jpeg(i, kind < 0 ? 0 : kind);
      const std::string cls = kind < 0 ? "x" : std::to_string(i);
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".jpg", jpg).ok());
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(cls.data()), cls.size()}).ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return dir + "/s{0..2}.tar";
}

LoaderOptions Options(const std::string& shards, const std::string& device, ImageDecode decode,
                      ResizeMode mode = ResizeMode::kRandomResizedCrop) {
  ImageSpec spec;
  spec.mode = mode;
  spec.height = spec.width = 128;
  spec.random_hflip = true;
  spec.decode = decode;
  LoaderOptions o;
  o.sources = {shards};
  o.fields = {ImageField("jpg", spec), ScalarField("cls", DType::kI64)};
  o.batch_size = 8;
  o.shuffle = true;
  o.seed = 5;
  o.decode_threads = 2;
  o.prefetch_batches = 2;
  o.device = device;
  o.late_copy_ms = 2;
  return o;
}

using test_data::Drain;

// The same loader decoding on the CPU only, on the host: the reference.
LoaderOptions CpuTwin(LoaderOptions o) {
  o.device = "cpu";
  for (FieldSpec& f : o.fields) f.image.decode = ImageDecode::kCpu;
  return o;
}

uint64_t Refused(const RecorderSnapshot& s, const std::string& reason) {
  for (const auto& [r, n] : s.gpu_refused) {
    if (r == reason) return n;
  }
  return 0;
}

TEST(GpuDecodeLoaderTest, GpuBatchesEqualTheCpuPathsInEveryMode) {
  const std::string shards = MakeShards();
  for (ResizeMode mode : {ResizeMode::kRandomResizedCrop, ResizeMode::kShorterCenterCrop, ResizeMode::kLongestPad}) {
    auto cpu = Loader::Create(Options(shards, "cpu", ImageDecode::kAuto, mode));  // auto on a CPU device: the CPU
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    EXPECT_TRUE((*cpu)->Stats().gpu_decoder.empty());
    const std::vector<std::string> expected = Drain(**cpu);
    ASSERT_EQ(expected.size(), 6u);
    auto gpu = Loader::Create(Options(shards, "cpu-late", ImageDecode::kGpu, mode));
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    EXPECT_TRUE(Drain(**gpu) == expected) << "mode " << static_cast<int>(mode);
    const RecorderSnapshot s = (*gpu)->Stats();
    EXPECT_EQ(s.gpu_decoder, "stand-in");
    // >= 48: the next epoch's first batches may be made ahead (epoch carry-over).
    EXPECT_GE(s.gpu_images, 48u) << (s.gpu_refused.empty() ? "" : s.gpu_refused[0].first);
    EXPECT_EQ(s.gpu_share, 1.0);
    EXPECT_EQ(s.h2d_overwrites, 0u);
    EXPECT_LE(s.device_buffers_peak, 3);
  }
}

TEST(GpuDecodeLoaderTest, JpegsLargerThanTheirSlotStillDecodeOnTheGpu) {
  // 24x24x3 = 1728-byte slots: every test JPEG is larger, and is kept beside the batch.
  const std::string shards = MakeShards();
  LoaderOptions c = Options(shards, "cpu", ImageDecode::kCpu);
  LoaderOptions g = Options(shards, "cpu-late", ImageDecode::kGpu);
  c.fields[0].image.height = c.fields[0].image.width = 24;
  g.fields[0].image.height = g.fields[0].image.width = 24;
  auto cpu = Loader::Create(c);
  auto gpu = Loader::Create(g);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  EXPECT_TRUE(Drain(**gpu) == Drain(**cpu));
  const RecorderSnapshot s = (*gpu)->Stats();
  EXPECT_GE(s.gpu_images, 48u);  // and the next epoch's first batches, made ahead
  EXPECT_TRUE(s.gpu_refused.empty());
}

TEST(GpuDecodeLoaderTest, WhatTheGpuRefusesDecodesOnTheCpuAndIsCounted) {
  const std::string shards = MakeShards({{3, 2}, {17, 2}, {20, 3}, {33, 5}});
  auto cpu = Loader::Create(Options(shards, "cpu", ImageDecode::kCpu));
  ASSERT_TRUE(cpu.ok());
  const std::vector<std::string> expected = Drain(**cpu);
  auto gpu = Loader::Create(Options(shards, "cpu-late", ImageDecode::kGpu));
  ASSERT_TRUE(gpu.ok());
  EXPECT_TRUE(Drain(**gpu) == expected);
  const RecorderSnapshot s = (*gpu)->Stats();
  // Once an epoch, and again for the next epoch's first batches if they were made ahead.
  EXPECT_GE(Refused(s, "progressive"), 2u);
  EXPECT_GE(Refused(s, "cmyk"), 1u);
  EXPECT_EQ(s.gpu_refused.size(), 2u);
  EXPECT_GE(s.gpu_images, 45u);  // gray is taken
  EXPECT_EQ(s.gpu_cpu_images, Refused(s, "progressive") + Refused(s, "cmyk"));
}

TEST(GpuDecodeLoaderTest, ACorruptJpegGetsTheCpuErrorAndTheSkipPolicy) {
  const std::string shards = MakeShards({{9, 4}});
  LoaderOptions o = Options(shards, "cpu-late", ImageDecode::kGpu);
  auto raising = Loader::Create(o);
  ASSERT_TRUE(raising.ok());
  bool failed = false;
  while (true) {
    auto batch = (*raising)->Next();
    if (!batch.ok()) {
      failed = true;
      EXPECT_NE(batch.status().message().find("k9.jpg"), std::string::npos) << batch.status().message();
      break;
    }
    if (!*batch) break;
  }
  EXPECT_TRUE(failed);
  o.on_error = OnError::kSkip;
  auto cpu = Loader::Create(CpuTwin(o));
  auto gpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  EXPECT_TRUE(Drain(**gpu) == Drain(**cpu));
  EXPECT_EQ((*gpu)->Skips().skipped, 1);
  EXPECT_GE(Refused((*gpu)->Stats(), "truncated"), 1u);
}

TEST(GpuDecodeLoaderTest, ASlotRefilledAfterAnotherFieldFailedKeepsItsReplacement) {
  // k12's JPEG is staged for the GPU, its cls fails: the slot is refilled on
  // the CPU, and the staged decode of k12's image must not land over it.
  const std::string shards = MakeShards({{12, -1}, {40, -1}});
  LoaderOptions o = Options(shards, "cpu-late", ImageDecode::kGpu);
  o.on_error = OnError::kSkip;
  auto cpu = Loader::Create(CpuTwin(o));
  auto gpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  EXPECT_TRUE(Drain(**gpu) == Drain(**cpu));
  EXPECT_EQ((*gpu)->Skips().skipped, 2);
}

TEST(GpuDecodeLoaderTest, AutoSplitFollowsTheMeasuredRates) {
  const std::string shards = MakeShards();
  auto cpu = Loader::Create(Options(shards, "cpu", ImageDecode::kCpu));
  ASSERT_TRUE(cpu.ok());
  const std::vector<std::string> expected = Drain(**cpu);
  // A stand-in slower than the CPU decoders by far (5 ms an image): its share falls.
  LoaderOptions o = Options(shards, "cpu-late", ImageDecode::kAuto);
  o.gpu_standin_delay_us = 5000;
  auto slow = Loader::Create(o);
  ASSERT_TRUE(slow.ok());
  const double first = (*slow)->Stats().gpu_share;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    ASSERT_TRUE((*slow)->SetEpoch(epoch).ok());
    std::vector<std::string> got = Drain(**slow);
    if (epoch == 0) {
      EXPECT_TRUE(got == expected);  // whoever decodes, the same bytes
    }
  }
  const RecorderSnapshot s = (*slow)->Stats();
  EXPECT_LT(s.gpu_share, first) << s.gpu_share_why;
  EXPECT_LT(s.gpu_share, 0.5) << s.gpu_share_why;
  EXPECT_GT(s.gpu_cpu_images, 0u);
  EXPECT_NE(s.gpu_share_why.find("images/s"), std::string::npos) << s.gpu_share_why;
  EXPECT_EQ(s.h2d_overwrites, 0u);
}

TEST(GpuDecodeLoaderTest, DroppedWithDecodesInFlightAndRefusedWhereItCannotRun) {
  const std::string shards = MakeShards();
  {
    LoaderOptions o = Options(shards, "cpu-late", ImageDecode::kGpu);
    o.gpu_standin_delay_us = 3000;
    auto l = Loader::Create(o);
    ASSERT_TRUE(l.ok());
    auto b = (*l)->Next();
    ASSERT_TRUE(b.ok() && *b);
  }  // batches and decodes in flight: the destructor returns (the test's timeout would say otherwise)
  auto cpu_gpu = Loader::Create(Options(shards, "cpu", ImageDecode::kGpu));
  ASSERT_FALSE(cpu_gpu.ok());
  EXPECT_NE(cpu_gpu.status().message().find("decode=\"gpu\" needs device=\"cuda\""), std::string::npos);
  LoaderOptions box = Options(shards, "cpu-late", ImageDecode::kGpu);
  box.fields[0].image.resample = Resample::kBox;
  EXPECT_FALSE(Loader::Create(box).ok());
}

TEST(GpuDecodeLoaderTest, AHardwareDecoderThatStopsReturningCostsOneBoundedWait) {
  // The stand-in's third hardware batch never returns (until the loader
  // goes): the watchdog gives up on it after 300 ms, its images and every
  // later one decode on the CPU, and the batches are the CPU path's, each
  // once, in order (the cls field is the sample's index), this epoch and the next.
  const std::string shards = MakeShards();
  LoaderOptions o = Options(shards, "cpu-late", ImageDecode::kGpu);
  o.gpu_standin_stall_after = 2;
  o.gpu_standin_watchdog_ms = 300;
  auto cpu = Loader::Create(CpuTwin(o));
  auto gpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE((*cpu)->SetEpoch(epoch).ok());
    ASSERT_TRUE((*gpu)->SetEpoch(epoch).ok());
    const std::vector<std::string> expected = Drain(**cpu);
    ASSERT_EQ(expected.size(), 6u);
    EXPECT_TRUE(Drain(**gpu) == expected) << "epoch " << epoch;
  }
  const RecorderSnapshot s = (*gpu)->Stats();
  EXPECT_NE(s.gpu_failure.find("did not return within"), std::string::npos) << s.gpu_failure;
  EXPECT_EQ(s.gpu_share, 0.0);
  EXPECT_NE(s.gpu_share_why.find("GPU decoder off"), std::string::npos) << s.gpu_share_why;
  EXPECT_EQ(s.gpu_images, 16u);  // the two batches that returned
  EXPECT_GE(s.gpu_cpu_fallbacks, 8u);  // the hung batch's, and any staged before the watchdog fired
  EXPECT_GE(s.gpu_cpu_images, 48u);  // the rest of both epochs, on the decode threads
  EXPECT_EQ(s.h2d_overwrites, 0u);
}

// The same loader in stream mode: one pass of the 48 samples an epoch, through a shuffle buffer.
LoaderOptions Streamed(LoaderOptions o) {
  o.stream = true;
  o.samples_per_epoch = 48;
  o.shuffle_buffer = 10;
  return o;
}

TEST(GpuDecodeLoaderTest, AStreamDecodesOnTheGpuAsTheIndexedModeDoes) {
  // k3 progressive, k20 CMYK: refused by the GPU decoder, decoded on the CPU.
  const std::string shards = MakeShards({{3, 2}, {20, 3}});
  for (ImageDecode decode : {ImageDecode::kGpu, ImageDecode::kAuto}) {
    const LoaderOptions o = Streamed(Options(shards, "cpu-late", decode));
    auto cpu = Loader::Create(CpuTwin(o));
    auto gpu = Loader::Create(o);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {  // the second epoch goes on along the stream
      ASSERT_TRUE((*cpu)->SetEpoch(epoch).ok());
      ASSERT_TRUE((*gpu)->SetEpoch(epoch).ok());
      const std::vector<std::string> expected = Drain(**cpu);
      ASSERT_EQ(expected.size(), 6u);
      EXPECT_TRUE(Drain(**gpu) == expected) << "epoch " << epoch << ", decode " << static_cast<int>(decode);
    }
    const RecorderSnapshot s = (*gpu)->Stats();
    EXPECT_EQ(s.gpu_decoder, "stand-in");
    EXPECT_EQ((*gpu)->Settings().gpu_decoder, "stand-in");
    EXPECT_EQ(s.h2d_overwrites, 0u);
    EXPECT_LE(s.device_buffers_peak, 3);  // prefetch 2 + the batch in use
    EXPECT_GE(s.h2d_early, 12u);          // every batch's copy issued as it completed
    EXPECT_EQ(s.h2d_at_delivery, 0u);
    if (decode == ImageDecode::kGpu) {
      EXPECT_EQ(s.gpu_share, 1.0);
      EXPECT_GE(s.gpu_images, 2u * 46);  // both epochs, but the refused
      EXPECT_GE(Refused(s, "progressive"), 2u);
      EXPECT_GE(Refused(s, "cmyk"), 2u);
    } else {
      EXPECT_GT(s.gpu_images + s.gpu_cpu_images, 2u * 46);
      EXPECT_FALSE(s.gpu_share_why.empty());
    }
  }
  {  // dropped with GPU decodes in flight: the destructor returns
    LoaderOptions o = Streamed(Options(shards, "cpu-late", ImageDecode::kGpu));
    o.gpu_standin_delay_us = 3000;
    auto l = Loader::Create(o);
    ASSERT_TRUE(l.ok());
    auto b = (*l)->Next();
    ASSERT_TRUE(b.ok() && *b);
  }
}

TEST(GpuDecodeLoaderTest, AStreamSlotRepeatedByTheSkipRuleGetsItsNeighboursGpuPixels) {
  // on_error=skip in a stream: a failed slot repeats the batch's next good
  // slot. Every JPEG is staged for the GPU, so a slot's host bytes hold its
  // JPEG, not pixels: k9 (corrupt: the CPU's error) and k12, k40 (JPEG
  // staged, cls not a number) must get their neighbour's decoded image, not
  // its compressed bytes, and not their own staged one. Those batches are
  // copied at delivery, after the repeat.
  const std::string shards = MakeShards({{9, 4}, {12, -1}, {40, -1}});
  LoaderOptions o = Streamed(Options(shards, "cpu-late", ImageDecode::kGpu));
  o.on_error = OnError::kSkip;
  auto cpu = Loader::Create(CpuTwin(o));
  auto gpu = Loader::Create(o);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  const std::vector<std::string> expected = Drain(**cpu);
  ASSERT_EQ(expected.size(), 6u);
  EXPECT_TRUE(Drain(**gpu) == expected);
  EXPECT_EQ((*gpu)->Skips().skipped, 3);
  EXPECT_EQ((*gpu)->Skips().refilled, 3);
  const RecorderSnapshot s = (*gpu)->Stats();
  EXPECT_GE(s.h2d_at_delivery, 1u);
  EXPECT_GE(Refused(s, "truncated"), 1u);
  EXPECT_EQ(s.h2d_overwrites, 0u);
}

}  // namespace
}  // namespace stoker
