// io: the mapped reader reads what pread reads, a file truncated under its
// mapping is a DataLoss naming file and offset (never a SIGBUS that kills the
// process), a SIGBUS outside a guarded copy still kills, and the process-wide
// mapping cache reuses a mapping only for the same version of a file.
#include "io/mapped_reader.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/fault_guard.h"

// Under a sanitizer its own SIGBUS handler reports a fault outside ours.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define STOKER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define STOKER_SANITIZED 1
#endif
#endif

namespace stoker {
namespace {

std::string TempFile(const std::vector<uint8_t>& bytes) {
  char tmpl[] = "/tmp/stoker-mapped-XXXXXX";
  int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  return tmpl;
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::unique_ptr<RandomAccessReader> OpenMapped(const std::string& path) {
  auto r = OpenShardReader(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(dynamic_cast<MappedReader*>(r->get()), nullptr) << "a local plain file is mapped";
  return std::move(r).value();
}

TEST(MappedReaderTest, ReadsWhatPreadReads) {
  const std::vector<uint8_t> bytes = Pattern(3 * 4096 + 123, 1);
  const std::string path = TempFile(bytes);
  auto mapped = OpenMapped(path);
  auto posix = PosixReader::Open(path);
  ASSERT_TRUE(posix.ok());
  EXPECT_EQ(mapped->Size(), bytes.size());
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = rng() % (bytes.size() + 10);
    std::vector<uint8_t> a(rng() % 9000), b(a.size());
    auto ga = mapped->ReadAt(off, a);
    auto gb = (*posix)->ReadAt(off, b);
    ASSERT_TRUE(ga.ok() && gb.ok());
    ASSERT_EQ(*ga, *gb);
    a.resize(*ga);
    b.resize(*gb);
    EXPECT_EQ(a, b);
  }
  // Detours land in their destinations; the rest in out.
  std::vector<uint8_t> out(10000), d1(100), d2(3000);
  std::vector<RandomAccessReader::Detour> detours{{50, d1}, {4000, d2}};
  ASSERT_TRUE(mapped->PReadDetoured(7, out, detours).ok());
  for (size_t i = 0; i < out.size(); ++i) {
    if ((i >= 50 && i < 150) || (i >= 4000 && i < 7000)) continue;
    ASSERT_EQ(out[i], bytes[7 + i]) << i;
  }
  EXPECT_TRUE(std::equal(d1.begin(), d1.end(), bytes.begin() + 57));
  EXPECT_TRUE(std::equal(d2.begin(), d2.end(), bytes.begin() + 4007));
  // Past the end: pread's short-read DataLoss.
  std::vector<uint8_t> tail(200);
  Status st = mapped->PReadDetoured(bytes.size() - 100, tail, {});
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos);
  unlink(path.c_str());
}

TEST(MappedReaderTest, TruncatedUnderTheMappingIsDataLossNotACrash) {
  const std::vector<uint8_t> bytes = Pattern(64 * 4096, 2);
  const std::string path = TempFile(bytes);
  auto r = OpenMapped(path);
  std::vector<uint8_t> out(8192);
  ASSERT_TRUE(r->PReadDetoured(40 * 4096, out, {}).ok());  // its pages are mapped now
  ASSERT_EQ(truncate(path.c_str(), 10 * 4096 + 100), 0);
  // Whole pages gone: the guarded copy faults; the error names file and offset.
  Status st = r->PReadDetoured(40 * 4096, out, {});
  ASSERT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("offset " + std::to_string(40 * 4096)), std::string::npos) << st.message();
  // Into a detour (the batch slot) as well.
  std::vector<uint8_t> slot(4096);
  std::vector<RandomAccessReader::Detour> detours{{100, slot}};
  st = r->PReadDetoured(30 * 4096, out, detours);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  auto got = r->ReadAt(20 * 4096, out);
  EXPECT_FALSE(got.ok());
  // The tail of the last page reads zeros without a fault: the fstat after
  // the copy catches it.
  st = r->PReadDetoured(10 * 4096 + 200, std::span(out).first(1000), {});
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  // What is still there reads as before.
  ASSERT_TRUE(r->PReadDetoured(4096, std::span(out).first(4096), {}).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 4096, bytes.begin() + 4096));
  unlink(path.c_str());
}

TEST(MappedReaderTest, ConcurrentReadersSurviveATruncation) {
  const std::vector<uint8_t> bytes = Pattern(256 * 4096, 3);
  const std::string path = TempFile(bytes);
  auto r = OpenMapped(path);
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, wrong{0}, reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(64 * 1024);
      for (uint64_t i = t; !stop.load(); i += 7) {
        const uint64_t off = (i * 4096) % (bytes.size() - out.size());
        Status st = r->PReadDetoured(off, out, {});
        ++reads;
        if (!st.ok()) {
          if (st.code() != StatusCode::kDataLoss || st.message().find(path) == std::string::npos) ++wrong;
          ++errors;
        } else if (!std::equal(out.begin(), out.end(), bytes.begin() + off)) {
          ++wrong;  // a successful read returns the file's bytes, never zeros
        }
      }
    });
  }
  // Counted, not timed: on a loaded machine 30 ms may pass before a reader
  // has run at all. Reads before the truncation, then until one fails (a
  // minute at most, so that a reader that never notices ends the test).
  const auto wait_for = [](const std::atomic<int>& n, int at_least) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (n.load() < at_least && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  wait_for(reads, 8);
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  wait_for(errors, 4);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  unlink(path.c_str());
}

TEST(MappedReaderDeathTest, ASigbusOutsideAGuardedCopyStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string path = TempFile(Pattern(4 * 4096, 4));
  // Killed by SIGBUS natively; a sanitizer's own handler reports it and exits
  // non-zero. Either way it must not survive: surviving exits 0, which fails.
  EXPECT_DEATH(
      {
        auto r = OpenShardReader(path);  // installs the guard's handler
        int fd = open(path.c_str(), O_RDONLY);
        auto* p = static_cast<volatile uint8_t*>(mmap(nullptr, 4 * 4096, PROT_READ, MAP_SHARED, fd, 0));
        if (ftruncate(open(path.c_str(), O_WRONLY), 0) != 0) std::_Exit(0);
        uint8_t x = p[3 * 4096];  // not inside CopyGuarded: the previous (default) action
        std::_Exit(x == 0 ? 0 : 0);
      },
      "");
#if !defined(STOKER_SANITIZED)
  EXPECT_EXIT(
      {
        auto r = OpenShardReader(path);
        int fd = open(path.c_str(), O_RDONLY);
        auto* p = static_cast<volatile uint8_t*>(mmap(nullptr, 4 * 4096, PROT_READ, MAP_SHARED, fd, 0));
        if (ftruncate(open(path.c_str(), O_WRONLY), 0) != 0) std::_Exit(0);
        std::_Exit(p[3 * 4096] == 0 ? 0 : 0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
#endif
  unlink(path.c_str());
}

TEST(MappedReaderTest, TheCacheSharesOneVersionOfAFile) {
  const std::string path = TempFile(Pattern(5 * 4096, 5));
  FileMapping::ClearCache();
  const uint64_t before = FileMapping::MapsMade();
  { auto a = OpenMapped(path); }
  auto b = OpenMapped(path);  // the first reader is gone, its mapping cached
  EXPECT_EQ(FileMapping::MapsMade(), before + 1);
  EXPECT_EQ(FileMapping::CachedCount(), 1u);
  // A new version (another size) maps anew and reads the new bytes.
  const std::vector<uint8_t> v2 = Pattern(6 * 4096, 6);
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(v2.data(), 1, v2.size(), f);
  std::fclose(f);
  auto c = OpenMapped(path);
  EXPECT_EQ(FileMapping::MapsMade(), before + 2);
  std::vector<uint8_t> out(v2.size());
  ASSERT_TRUE(c->PRead(0, out).ok());
  EXPECT_EQ(out, v2);
  FileMapping::ClearCache();
  unlink(path.c_str());
}

TEST(MappedReaderTest, OffTurnsMappingOff) {
  const std::string path = TempFile(Pattern(4096, 8));
  setenv("STOKER_MMAP", "0", 1);
  auto r = OpenShardReader(path);
  unsetenv("STOKER_MMAP");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(dynamic_cast<MappedReader*>(r->get()), nullptr);
  unlink(path.c_str());
}

}  // namespace
}  // namespace stoker
