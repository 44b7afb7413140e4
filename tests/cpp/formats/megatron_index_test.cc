// Megatron .bin/.idx: the writer's pair reads back token-identical, and every
// corrupt or mismatched pair is refused at open with the file, field and offset.
#include "formats/megatron_index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <filesystem>

#include "core/file.h"

namespace stoker {
namespace {

class MegatronIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("stoker_megatron_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    prefix_ = (dir_ / "corpus").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void WritePair(DType dtype) {
    auto writer = MegatronWriter::Create(prefix_, dtype);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    docs_ = {{1, 2, 3}, {}, {65000, 7}, {4, 5, 6, 7, 8, 9}};
    for (const auto& d : docs_) ASSERT_TRUE((*writer)->AddDocument(d).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  std::string ReadIdx() { return *ReadWholeFile(prefix_ + ".idx"); }
  void WriteIdx(const std::string& bytes) {
    ASSERT_TRUE(WriteWholeFile(prefix_ + ".idx", std::span<const uint8_t>(
                                                      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))
                    .ok());
  }
  std::string OpenError() {
    auto r = MegatronDataset::Open(prefix_);
    return r.ok() ? std::string("opened") : r.status().ToString();
  }

  std::filesystem::path dir_;
  std::string prefix_;
  std::vector<std::vector<int64_t>> docs_;
};

TEST_F(MegatronIndexTest, WriterPairReadsBackIdentical) {
  for (DType dtype : {DType::kU16, DType::kI32}) {
    WritePair(dtype);
    auto data = MegatronDataset::Open(prefix_);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ((*data)->dtype(), dtype);
    ASSERT_EQ((*data)->num_sequences(), docs_.size());
    EXPECT_EQ((*data)->document_indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
    for (size_t s = 0; s < docs_.size(); ++s) {
      std::vector<int64_t> out(docs_[s].size());
      ASSERT_TRUE((*data)->CopyTokens(s, 0, static_cast<int64_t>(out.size()), out.data()).ok());
      EXPECT_EQ(out, docs_[s]);
    }
    std::vector<int64_t> part(3);
    ASSERT_TRUE((*data)->CopyTokens(3, 2, 3, part.data()).ok());
    EXPECT_EQ(part, (std::vector<int64_t>{6, 7, 8}));
  }
}

TEST_F(MegatronIndexTest, WriterRefusesIdsOutsideTheDtype) {
  auto writer = MegatronWriter::Create(prefix_, DType::kU16);
  ASSERT_TRUE(writer.ok());
  std::vector<int64_t> doc = {1, 70000};
  EXPECT_FALSE((*writer)->AddDocument(doc).ok());
  EXPECT_EQ(MegatronTokenDType(65498), DType::kU16);
  EXPECT_EQ(MegatronTokenDType(65499), DType::kI32);
}

TEST_F(MegatronIndexTest, WrongMagic) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  idx[0] = 'X';
  WriteIdx(idx);
  std::string e = OpenError();
  EXPECT_NE(e.find("corpus.idx"), std::string::npos) << e;
  EXPECT_NE(e.find("magic at byte offset 0"), std::string::npos) << e;
}

TEST_F(MegatronIndexTest, WrongVersion) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  idx[9] = 2;
  WriteIdx(idx);
  EXPECT_NE(OpenError().find("version at byte offset 9: 2"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, UnknownDtypeCode) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  idx[17] = 42;
  WriteIdx(idx);
  EXPECT_NE(OpenError().find("dtype at byte offset 17: unknown dtype code 42"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, TruncatedIdx) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  WriteIdx(idx.substr(0, idx.size() - 5));
  std::string e = OpenError();
  EXPECT_NE(e.find("document_indices at byte offset"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  WriteIdx(idx.substr(0, 20));
  EXPECT_NE(OpenError().find("truncated header"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, PointerPastTheEndOfBin) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  const size_t seqs = 4;
  const int64_t far = 1 << 20;
  std::memcpy(idx.data() + kMegatronHeaderBytes + 4 * seqs + 8 * 2, &far, 8);  // sequence 2's pointer
  WriteIdx(idx);
  std::string e = OpenError();
  EXPECT_NE(e.find("sequence_pointers at byte offset " + std::to_string(kMegatronHeaderBytes + 4 * seqs + 16)),
            std::string::npos) << e;
  EXPECT_NE(e.find("past the end of"), std::string::npos) << e;
  EXPECT_NE(e.find("corpus.bin"), std::string::npos) << e;
}

TEST_F(MegatronIndexTest, LengthPastTheEndOfBin) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  const int32_t huge = 1000;
  std::memcpy(idx.data() + kMegatronHeaderBytes + 4 * 3, &huge, 4);  // the last sequence's length
  WriteIdx(idx);
  EXPECT_NE(OpenError().find("past the end of"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, PointerNearInt64MaxIsPastTheEndNotAnOverflow) {
  // Found by the fuzzer's reading (tests/fuzz/regressions/megatron_index): the
  // message's end offset, pointer + bytes, overflowed int64 (UB).
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  const int64_t near_max = std::numeric_limits<int64_t>::max() - 1;
  std::memcpy(idx.data() + kMegatronHeaderBytes + 4 * 4, &near_max, 8);  // sequence 0's pointer
  WriteIdx(idx);
  const std::string e = OpenError();
  EXPECT_NE(e.find("past the end of"), std::string::npos) << e;
  EXPECT_NE(e.find("[" + std::to_string(near_max) + ", "), std::string::npos) << e;
  const int64_t negative = -8;
  std::memcpy(idx.data() + kMegatronHeaderBytes + 4 * 4, &negative, 8);
  WriteIdx(idx);
  EXPECT_NE(OpenError().find("negative byte offset -8"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, BinShorterThanIndexSays) {
  WritePair(DType::kI32);
  std::filesystem::resize_file(prefix_ + ".bin", 8);
  EXPECT_NE(OpenError().find("sequence_pointers"), std::string::npos) << OpenError();
}

TEST_F(MegatronIndexTest, CountsThatDisagree) {
  WritePair(DType::kU16);
  std::string idx = ReadIdx();
  const int64_t wrong = 3;  // the last document index must equal sequence_count 4
  std::memcpy(idx.data() + idx.size() - 8, &wrong, 8);
  WriteIdx(idx);
  std::string e = OpenError();
  EXPECT_NE(e.find("document_indices"), std::string::npos) << e;
  EXPECT_NE(e.find("counts disagree"), std::string::npos) << e;
}

TEST_F(MegatronIndexTest, BinOfAnotherDtypeIsRefusedNamingBoth) {
  // The same documents written as int32, that .bin put beside the uint16 .idx:
  // every sequence lies inside it, yet read as uint16 half the tokens are 0.
  const std::string u16 = prefix_;
  prefix_ = (dir_ / "wide").string();
  WritePair(DType::kI32);
  prefix_ = u16;
  WritePair(DType::kU16);
  std::filesystem::copy_file(dir_ / "wide.bin", prefix_ + ".bin", std::filesystem::copy_options::overwrite_existing);
  std::string e = OpenError();
  EXPECT_NE(e.find("corpus.bin: 44 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("dtype uint16"), std::string::npos) << e;
  EXPECT_NE(e.find("11 tokens of 2 bytes, ending at byte 22"), std::string::npos) << e;
  EXPECT_NE(e.find("written as int32"), std::string::npos) << e;
}

TEST_F(MegatronIndexTest, BinLongerThanItsSequencesIsRefused) {
  WritePair(DType::kU16);
  std::filesystem::resize_file(prefix_ + ".bin", 22 + 6);
  std::string e = OpenError();
  EXPECT_NE(e.find("28 bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("ending at byte 22"), std::string::npos) << e;
  EXPECT_EQ(e.find("written as"), std::string::npos) << e;  // no dtype makes 28 bytes of 11 tokens
}

TEST_F(MegatronIndexTest, WriterRefusesToFinishWithoutTokens) {
  for (size_t empty_docs : {0u, 2u}) {
    auto writer = MegatronWriter::Create(prefix_, DType::kU16);
    ASSERT_TRUE(writer.ok());
    for (size_t i = 0; i < empty_docs; ++i) ASSERT_TRUE((*writer)->AddDocument({}).ok());
    Status st = (*writer)->Finish();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(empty_docs ? "2 documents, all empty" : "no documents"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find("corpus.{bin,idx}"), std::string::npos) << st.ToString();
    EXPECT_FALSE(std::filesystem::exists(prefix_ + ".bin"));
    EXPECT_FALSE(std::filesystem::exists(prefix_ + ".idx"));
  }
}

TEST_F(MegatronIndexTest, SummaryIsTheHeaderAndSizes) {
  WritePair(DType::kI32);
  auto summary = ReadMegatronSummary(prefix_);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto data = MegatronDataset::Open(prefix_);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(summary->dtype, DType::kI32);
  EXPECT_EQ(summary->dtype_code, (*data)->dtype_code());
  EXPECT_EQ(summary->sequences, (*data)->num_sequences());
  EXPECT_EQ(summary->documents, (*data)->document_indices().size() - 1);
  EXPECT_EQ(summary->bin_bytes, (*data)->bin_bytes());
  EXPECT_EQ(summary->idx_bytes, ReadIdx().size());
}

TEST_F(MegatronIndexTest, MissingBin) {
  WritePair(DType::kU16);
  std::filesystem::remove(prefix_ + ".bin");
  EXPECT_NE(OpenError().find("corpus.bin"), std::string::npos) << OpenError();
}

}  // namespace
}  // namespace stoker
