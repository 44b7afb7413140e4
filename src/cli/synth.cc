// cli/synth.cc — `stoker synth OUT_DIR --kind sa1b|imagenet --count N`: a
// built-in dataset for tests and demos, identical for a given seed everywhere.
//
// Images are real JPEGs (quality 90, 4:2:0) of natural-looking content:
// smooth gradients, soft-edged ellipses and rectangles, fine value-noise
// texture (tuned so q90 files weigh what real ones do: ~55 KB at 500x375,
// ~490 KB at 1500x1000), mild noise. Pure
// noise would be a poor stand-in: it compresses badly and makes resize
// quality meaningless. sa1b: ~1500x1000 images "sa_<n>.jpg" plus
// "sa_<n>_features.npz" (float16 "embeddings" (64,16,16) and "iou" (4,)).
// imagenet: ~500x375 images in 10 class folders "n0000000<k>/", a few gray.
// --layout shards is synth loose into a hidden scratch folder, then pack, so
// both paths give the same shards. Images are made on all cores.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "codecs/jpeg.h"
#include "core/cpu_share.h"
#include "core/file.h"
#include "formats/npy.h"
#include "formats/zip.h"

namespace stoker::cli {
namespace fs = std::filesystem;
namespace {

constexpr int kImagenetClasses = 10;
// Peak amplitude (levels) of each texture octave where the texture is at full
// strength: set so that quality-90 JPEGs weigh what real photos do (~50-60 KB
// at 500x375 like ImageNet, ~400-600 KB at 1500x1000 like SA-1B).
constexpr float kTextureLevels = 34.f;
constexpr float kSa1bDetail = 1.35f;

struct SynthOptions {
  std::string out_dir;
  std::string kind = "sa1b";
  int count = 0;
  uint64_t seed = 0;
  std::string layout = "loose";
  std::string shard_size = "64MB";
  std::string image_size;  // "WxH": the base size; empty: the kind's default
  int threads = 0;
  bool rename_wds = false;
  bool quiet = false;
};

// Band-limited value noise: random values on a grid of `cell` pixels,
// interpolated with a smoothstep; zero mean, about unit amplitude. Several
// octaves summed give the fine texture of real photos (foliage, fabric,
// gravel, skin pores) that JPEG must spend bits on: without it the images
// compress 2-3x smaller than real ones and decode unrealistically cheaply.
void AddValueNoise(std::vector<float>& tex, int w, int h, int cell, float amp, Rng& rng) {
  const int gw = w / cell + 2, gh = h / cell + 2;
  std::vector<float> grid(size_t(gw) * gh);
  uint64_t state = rng.Next() | 1;
  for (float& g : grid) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    g = float(state & 0xFFFF) / 32767.5f - 1.f;
  }
  // Per-column cell index and smoothstep weight, computed once.
  std::vector<int> gx(w);
  std::vector<float> fx(w);
  const float inv = 1.f / float(cell);
  for (int x = 0; x < w; ++x) {
    const float u = x * inv;
    gx[x] = int(u);
    const float t = u - gx[x];
    fx[x] = t * t * (3 - 2 * t);
  }
  for (int y = 0; y < h; ++y) {
    const float v = y * inv;
    const int gy = int(v);
    float ty = v - gy;
    ty = ty * ty * (3 - 2 * ty);
    const float* r0 = &grid[size_t(gy) * gw];
    const float* r1 = r0 + gw;
    float* out = &tex[size_t(y) * w];
    for (int x = 0; x < w; ++x) {
      const int i = gx[x];
      const float a = r0[i] + (r0[i + 1] - r0[i]) * fx[x];
      const float b = r1[i] + (r1[i + 1] - r1[i]) * fx[x];
      out[x] += amp * (a + (b - a) * ty);
    }
  }
}

// HWC RGB (or gray) pixels of one picture drawn from rng.
std::vector<uint8_t> RenderImage(int w, int h, bool gray, float detail, Rng& rng) {
  std::vector<float> px(size_t(w) * h * 3);
  // How strongly the fine texture shows at each pixel: the background and
  // each object get their own (some objects smooth, like sky or a wall).
  std::vector<float> tex_amp(size_t(w) * h, detail * float(rng.Uniform(0.5, 1.3)));
  // Background: a linear blend between two colours along a random direction,
  // plus a gentle wave (separable through sin(a+b) to avoid a sin per pixel).
  float c0[3], c1[3];
  for (int c = 0; c < 3; ++c) c0[c] = float(rng.Uniform(20, 235)), c1[c] = float(rng.Uniform(20, 235));
  const double angle = rng.Uniform(0, 2 * M_PI), dx = std::cos(angle), dy = std::sin(angle);
  const double span = std::abs(dx) * w + std::abs(dy) * h, t0 = std::min(0.0, dx * w) + std::min(0.0, dy * h);
  const double kx = rng.Uniform(1, 3) * 2 * M_PI / w, ky = rng.Uniform(1, 3) * 2 * M_PI / h;
  const double phase = rng.Uniform(0, 2 * M_PI), amp = rng.Uniform(6, 16);
  std::vector<float> sx(w), cx(w), sy(h), cy(h);
  for (int x = 0; x < w; ++x) sx[x] = float(std::sin(kx * x)), cx[x] = float(std::cos(kx * x));
  for (int y = 0; y < h; ++y) sy[y] = float(std::sin(ky * y + phase)), cy[y] = float(std::cos(ky * y + phase));
  for (int y = 0; y < h; ++y) {
    float* row = &px[size_t(y) * w * 3];
    for (int x = 0; x < w; ++x) {
      const float t = float((x * dx + y * dy - t0) / span);
      const float wave = float(amp) * (sx[x] * cy[y] + cx[x] * sy[y]);
      for (int c = 0; c < 3; ++c) row[x * 3 + c] = c0[c] + (c1[c] - c0[c]) * t + wave * (0.6f + 0.2f * c);
    }
  }
  // Objects: ellipses and rotated rectangles with antialiased, soft edges and
  // a little shading, alpha-blended over what is there.
  const double unit = std::min(w, h);
  const int shapes = rng.RandInt(6, 12);
  for (int s = 0; s < shapes; ++s) {
    const bool ellipse = rng.RandInt(0, 1) == 0;
    const double ox = rng.Uniform(0, w), oy = rng.Uniform(0, h);
    const double a = rng.Uniform(0.04, 0.25) * unit, b = a * rng.Uniform(0.4, 1.6);
    const double rot = rng.Uniform(0, M_PI), cr = std::cos(rot), sr = std::sin(rot);
    const double soft = std::max(0.8, rng.Uniform(1.0, 6.0) * unit / 500);
    const double opacity = rng.Uniform(0.55, 0.95);
    float color[3];
    for (float& c : color) c = float(rng.Uniform(0, 255));
    const float texture = detail * (rng.RandInt(0, 4) == 0 ? float(rng.Uniform(0.0, 0.3)) : float(rng.Uniform(0.6, 1.6)));
    const double reach = std::hypot(a, b) + 2 * soft;  // covers a rotated rectangle's corners
    const int x0 = std::max(0, int(ox - reach)), x1 = std::min(w, int(ox + reach) + 1);
    const int y0 = std::max(0, int(oy - reach)), y1 = std::min(h, int(oy + reach) + 1);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const double ddx = x + 0.5 - ox, ddy = y + 0.5 - oy;
        const double u = ddx * cr + ddy * sr, v = -ddx * sr + ddy * cr;
        const double d = ellipse ? (std::sqrt((u / a) * (u / a) + (v / b) * (v / b)) - 1) * std::min(a, b)
                                 : std::max(std::abs(u) - a, std::abs(v) - b);
        const double alpha = opacity * std::clamp(0.5 - d / soft, 0.0, 1.0);
        if (alpha <= 0) continue;
        const float shade = float(1 + 0.2 * u / a), fa = float(alpha);
        float* p = &px[(size_t(y) * w + x) * 3];
        for (int c = 0; c < 3; ++c) p[c] += fa * (std::min(255.f, color[c] * shade) - p[c]);
        float& ta = tex_amp[size_t(y) * w + x];
        ta += fa * (texture - ta);
      }
    }
  }
  // Fine texture: octaves of value noise at 2-16 pixel scales (the same
  // field on all channels, i.e. mostly luminance detail, as in photos),
  // scaled by the local texture amplitude.
  std::vector<float> tex(size_t(w) * h, 0.f);
  AddValueNoise(tex, w, h, 2, kTextureLevels * 0.55f, rng);
  AddValueNoise(tex, w, h, 4, kTextureLevels * 0.7f, rng);
  AddValueNoise(tex, w, h, 8, kTextureLevels * 0.8f, rng);
  AddValueNoise(tex, w, h, 16, kTextureLevels * 0.8f, rng);
  for (size_t i = 0; i < size_t(w) * h; ++i) {
    const float t = tex[i] * tex_amp[i];
    float* p = &px[i * 3];
    p[0] += t, p[1] += t * 0.95f, p[2] += t * 0.9f;
  }
  // Mild sensor-like noise, about +-3 levels, then quantize.
  const int channels = gray ? 1 : 3;
  std::vector<uint8_t> out(size_t(w) * h * channels);
  uint64_t state = rng.Next() | 1;
  for (size_t i = 0; i < size_t(w) * h; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    const float noise = (float((state & 0xFF) + ((state >> 8) & 0xFF)) / 255.f - 1.f) * 3.f;
    const float* p = &px[i * 3];
    if (gray) {
      out[i] = uint8_t(std::clamp(0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2] + noise + 0.5f, 0.f, 255.f));
    } else {
      for (int c = 0; c < 3; ++c) out[i * 3 + c] = uint8_t(std::clamp(p[c] + noise + 0.5f, 0.f, 255.f));
    }
  }
  return out;
}

// IEEE binary16 from float, round to nearest even (values here are normal and small).
uint16_t ToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = int((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (exp <= 0) return uint16_t(sign);  // underflow to zero: fine for this content
  if (exp >= 31) return uint16_t(sign | 0x7C00);
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
  return uint16_t(half);
}

std::vector<uint8_t> Float16Npy(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  std::vector<uint16_t> half(values.size());
  for (size_t i = 0; i < values.size(); ++i) half[i] = ToHalf(values[i]);
  return EncodeNpy(DType::kF16, shape, {reinterpret_cast<const uint8_t*>(half.data()), half.size() * 2});
}

// SAM-like precomputed features: smooth per-channel patterns plus noise.
std::vector<uint8_t> RenderFeatures(Rng& rng) {
  std::vector<float> emb(64 * 16 * 16);
  for (int c = 0; c < 64; ++c) {
    const double fx = rng.Uniform(0.1, 0.8), fy = rng.Uniform(0.1, 0.8), ph = rng.Uniform(0, 6.3);
    const double scale = rng.Uniform(0.2, 1.5);
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        emb[(c * 16 + y) * 16 + x] = float(scale * std::sin(fx * x + fy * y + ph) + rng.Uniform(-0.1, 0.1));
      }
    }
  }
  std::vector<float> iou(4);
  for (float& v : iou) v = float(rng.Uniform(0.6, 0.99));
  ZipWriter zip;
  const auto emb_npy = Float16Npy({64, 16, 16}, emb), iou_npy = Float16Npy({4}, iou);
  zip.Add("embeddings.npy", emb_npy, /*deflate=*/false);
  zip.Add("iou.npy", iou_npy, /*deflate=*/false);
  return zip.Finish();
}

std::string ClassName(int cls) {
  char name[16];
  std::snprintf(name, sizeof(name), "n%08d", cls);
  return name;
}

// Writes image i (and its features) under dir; returns the bytes written.
Result<uint64_t> MakeOne(const SynthOptions& opt, const std::string& dir, int base_w, int base_h, int i) {
  const uint64_t kind_salt = opt.kind == "sa1b" ? 0 : 0x5BD1E995ull;  // kinds differ at one seed
  Rng rng(Rng(opt.seed ^ kind_salt ^ (uint64_t(i + 1) * 0xD1B54A32D192ED03ull)).Next());
  const bool sa1b = opt.kind == "sa1b";
  int w = base_w, h = base_h;
  const int shape = rng.RandInt(0, 9);
  if (sa1b && shape >= 8) {
    w = base_w * 14 / 15, h = base_h * 21 / 20;  // 1500x1000 -> 1400x1050
  } else if (shape >= (sa1b ? 6 : 8)) {
    std::swap(w, h);  // portrait
  }
  const bool gray = !sa1b && i % 20 == 7;  // a few, and one already in a dozen
  // SA-1B's photos come from high-resolution cameras: more fine detail per pixel.
  const std::vector<uint8_t> pixels = RenderImage(w, h, gray, sa1b ? kSa1bDetail : 1.f, rng);
  STOKER_ASSIGN_OR_RETURN(std::vector<uint8_t> jpeg, EncodeJpeg(pixels.data(), w, h, gray ? 1 : 3, 90, 420));
  if (!sa1b) {
    const std::string cls = ClassName(i % kImagenetClasses);
    STOKER_RETURN_IF_ERROR(WriteWholeFile(dir + "/" + cls + "/" + cls + "_" + std::to_string(i + 1) + ".JPEG", jpeg));
    return jpeg.size();
  }
  const std::string id = "sa_" + std::to_string(i + 1);
  const std::vector<uint8_t> features = RenderFeatures(rng);
  STOKER_RETURN_IF_ERROR(WriteWholeFile(dir + "/" + id + ".jpg", jpeg));
  STOKER_RETURN_IF_ERROR(WriteWholeFile(dir + "/" + id + "_features.npz", features));
  return jpeg.size() + features.size();
}

Status WriteLoose(const SynthOptions& opt, const std::string& dir, int base_w, int base_h, uint64_t* bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot create " + dir + ": " + ec.message());
  if (opt.kind == "imagenet") {
    for (int c = 0; c < kImagenetClasses; ++c) {
      fs::create_directories(dir + "/" + ClassName(c), ec);
      if (ec) return IoError("cannot create " + dir + "/" + ClassName(c) + ": " + ec.message());
    }
  }
  Progress progress("synth", opt.count, 0, opt.quiet);
  std::atomic<int> next{0};
  std::atomic<uint64_t> total{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;  // guarded by mu
  auto work = [&] {
    for (int i; !failed.load() && (i = next.fetch_add(1)) < opt.count;) {
      Result<uint64_t> made = MakeOne(opt, dir, base_w, base_h, i);
      if (!made.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first_error = made.status();
        return;
      }
      total += *made;
      progress.Add(1, *made);
    }
  };
  const int threads = std::clamp(opt.threads > 0 ? opt.threads : CurrentCpuShare().cores, 1,
                                 opt.count);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  progress.Finish();
  *bytes = total;
  return first_error;
}

Status RunSynth(const SynthOptions& opt) {
  int w = opt.kind == "sa1b" ? 1500 : 500, h = opt.kind == "sa1b" ? 1000 : 375;
  if (!opt.image_size.empty()) {
    char x = 0;
    if (std::sscanf(opt.image_size.c_str(), "%d%c%d", &w, &x, &h) != 3 || (x != 'x' && x != 'X') || w < 16 ||
        h < 16 || w > 20000 || h > 20000) {
      return InvalidArgument("--image-size '" + opt.image_size + "': expected WxH, each 16..20000, e.g. 320x240");
    }
  }
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  if (opt.layout == "loose") {
    STOKER_RETURN_IF_ERROR(WriteLoose(opt, opt.out_dir, w, h, &bytes));
  } else {
    STOKER_ASSIGN_OR_RETURN(uint64_t shard_bytes, ParseByteSize(opt.shard_size));
    // Hidden, so that pack (and a later pack of OUT_DIR) skips it.
    const std::string scratch = opt.out_dir + "/.synth-loose";
    std::error_code ec;
    fs::remove_all(scratch, ec);
    Status status = WriteLoose(opt, scratch, w, h, &bytes);
    if (status.ok()) {
      PackOptions pack;
      pack.src_dir = scratch;
      pack.out_prefix = opt.out_dir + "/" + opt.kind;
      pack.shard_bytes = shard_bytes;
      pack.rename_wds = opt.rename_wds;
      pack.quiet = opt.quiet;
      status = RunPack(pack);
    }
    fs::remove_all(scratch, ec);
    STOKER_RETURN_IF_ERROR(status);
  }
  if (!opt.quiet) {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("synth: %d %s images%s (%s) in %s, %.2f s\n", opt.count, opt.kind.c_str(),
                opt.kind == "sa1b" ? " + features" : "", FormatBytes(double(bytes)).c_str(), opt.out_dir.c_str(),
                secs);
  }
  return Status::Ok();
}

}  // namespace

void RegisterSynth(CLI::App& app, Status* status) {
  auto opt = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a built-in synthetic dataset of real JPEGs (SA-1B or ImageNet style)");
  cmd->add_option("OUT_DIR", opt->out_dir, "output folder")->required();
  cmd->add_option("--kind", opt->kind, "dataset style")->capture_default_str()->check(CLI::IsMember({"sa1b", "imagenet"}));
  cmd->add_option("--count", opt->count, "number of images")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opt->seed, "content seed")->capture_default_str();
  cmd->add_option("--layout", opt->layout, "loose files, or tar shards (synth loose + pack)")
      ->capture_default_str()->check(CLI::IsMember({"loose", "shards"}));
  cmd->add_option("--shard-size", opt->shard_size, "target shard size with --layout shards")->capture_default_str();
  cmd->add_option("--image-size", opt->image_size, "base image size WxH (default 1500x1000 sa1b, 500x375 imagenet)");
  cmd->add_option("--threads", opt->threads, "worker threads (default: all cores)");
  cmd->add_flag("--rename-wds", opt->rename_wds, "with --layout shards: as pack --rename-wds");
  cmd->add_flag("-q,--quiet", opt->quiet, "no progress and no summary");
  cmd->callback([=] { *status = RunSynth(*opt); });
}

}  // namespace stoker::cli
