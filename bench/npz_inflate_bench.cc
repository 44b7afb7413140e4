// bench/npz_inflate_bench.cc — a deflated .npz member into its batch slot: the
// two ways, side by side (issue #8, "a deflated member inflates straight into
// its slot").
//   A  libdeflate's one-shot inflate of the whole member (npy header + data)
//      into scratch, CRC-32 over it, then memcpy of the data into the slot:
//      what SampleDecoder::DecodeNpz does (formats/zip.cc ExtractZipEntry).
//   B  zlib's streaming inflate: the header into a small buffer, then
//      next_out = the slot for the data; CRC-32 over header + slot. No copy.
// libdeflate has no streaming output, and the member's stream holds the
// header before the data, so B is the only way to inflate straight into the
// slot; the question is whether zlib's slower inflate costs more than the
// copy it saves.
// Inputs are made here, as np.savez_compressed makes them (zlib level 6, raw
// deflate): float16 and float32 normal noise (little to gain), small integers
// (compresses 3.4x).
// Build and run:
//   g++ -O2 bench/npz_inflate_bench.cc -o /tmp/npz_inflate_bench -ldeflate -lz && /tmp/npz_inflate_bench
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

uint16_t Half(float f) {  // round-toward-zero float -> IEEE half, enough for noise
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (exp << 10) | ((x >> 13) & 0x3ff));
}

std::vector<uint8_t> Npy(const std::string& descr, const std::string& shape, const std::vector<uint8_t>& data) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(dict.size() & 0xff), static_cast<uint8_t>(dict.size() >> 8)};
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> Deflate(const std::vector<uint8_t>& raw) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::vector<uint8_t> out(deflateBound(&z, raw.size()));
  z.next_in = const_cast<uint8_t*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

double Seconds(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

}  // namespace

int main() {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  struct Case {
    std::string name;
    std::vector<uint8_t> npy;
  };
  std::vector<Case> cases;
  {
    std::vector<uint8_t> d(64 * 16 * 16 * 2);
    for (size_t i = 0; i < d.size(); i += 2) {
      const uint16_t h = Half(normal(rng));
      std::memcpy(&d[i], &h, 2);
    }
    cases.push_back({"float16 64x16x16 (A's npz)", Npy("<f2", "(64, 16, 16)", d)});
  }
  {
    std::vector<uint8_t> d(256 * 256 * 4);
    for (size_t i = 0; i < d.size(); i += 4) {
      const float f = normal(rng);
      std::memcpy(&d[i], &f, 4);
    }
    cases.push_back({"float32 256x256", Npy("<f4", "(256, 256)", d)});
  }
  {
    std::vector<uint8_t> d(512 * 512);
    for (auto& b : d) b = static_cast<uint8_t>(rng() % 4);
    cases.push_back({"uint8 512x512 in [0, 4)", Npy("|u1", "(512, 512)", d)});
  }
  libdeflate_decompressor* dec = libdeflate_alloc_decompressor();
  z_stream zs{};
  inflateInit2(&zs, -15);
  for (const Case& c : cases) {
    const std::vector<uint8_t> comp = Deflate(c.npy);
    const size_t header = 10 + (c.npy[8] | (c.npy[9] << 8));
    const size_t data = c.npy.size() - header;
    const uint32_t want = static_cast<uint32_t>(crc32(0, c.npy.data(), static_cast<uInt>(c.npy.size())));
    // The slot: one of 64 in a batch buffer, so that it is not always cached.
    std::vector<uint8_t> scratch(c.npy.size()), head(header), batch(64 * data);
    const int reps = std::max(64, static_cast<int>(200000000 / c.npy.size()) / 64 * 64);
    std::vector<double> a_us, b_us;
    for (int round = 0; round < 7; ++round) {
      auto t = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        uint8_t* slot = batch.data() + (i % 64) * data;
        if (libdeflate_deflate_decompress(dec, comp.data(), comp.size(), scratch.data(), scratch.size(), nullptr) !=
                LIBDEFLATE_SUCCESS ||
            libdeflate_crc32(0, scratch.data(), scratch.size()) != want) {
          std::puts("A: bad");
          return 1;
        }
        std::memcpy(slot, scratch.data() + header, data);
      }
      a_us.push_back(Seconds(t) / reps * 1e6);
      t = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) {
        uint8_t* slot = batch.data() + (i % 64) * data;
        inflateReset(&zs);
        zs.next_in = const_cast<uint8_t*>(comp.data());
        zs.avail_in = static_cast<uInt>(comp.size());
        zs.next_out = head.data();
        zs.avail_out = static_cast<uInt>(header);
        inflate(&zs, Z_SYNC_FLUSH);  // (a real decoder parses the header here, then points at the slot)
        zs.next_out = slot;
        zs.avail_out = static_cast<uInt>(data);
        if (inflate(&zs, Z_FINISH) != Z_STREAM_END ||
            libdeflate_crc32(libdeflate_crc32(0, head.data(), header), slot, data) != want) {
          std::puts("B: bad");
          return 1;
        }
      }
      b_us.push_back(Seconds(t) / reps * 1e6);
    }
    std::sort(a_us.begin(), a_us.end());
    std::sort(b_us.begin(), b_us.end());
    std::printf("%-28s %7zu -> %7zu bytes: A libdeflate+copy %8.1f us [%0.1f-%0.1f]  B zlib into slot %8.1f us "
                "[%0.1f-%0.1f]  B/A %.2f\n",
                c.name.c_str(), c.npy.size(), comp.size(), a_us[3], a_us.front(), a_us.back(), b_us[3], b_us.front(),
                b_us.back(), b_us[3] / a_us[3]);
  }
  inflateEnd(&zs);
  libdeflate_free_decompressor(dec);
  return 0;
}
