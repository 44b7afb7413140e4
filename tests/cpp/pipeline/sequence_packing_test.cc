// SFT packing's plan in C++: first-fit and best-fit decreasing on lengths whose
// rows are worked out by hand here, long documents refused or cut, empty ones
// left out. Rows against megatron-core's reader and Grain: tests/python/test_packing.py.
#include "pipeline/sequence_packing.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

std::vector<std::vector<int64_t>> Rows(const PackPlan& p) {
  std::vector<std::vector<int64_t>> rows;
  for (int64_t r = 0; r < p.rows(); ++r) {
    rows.emplace_back(p.documents.begin() + p.row_offsets[r], p.documents.begin() + p.row_offsets[r + 1]);
  }
  return rows;
}

TEST(PlanPacking, FirstFitDecreasingTakesTheFirstRowWithRoom) {
  // Longest first: 8 (doc 2), 7 (4), 5 (0), 3 (1), 2 (3), 1 (5) into rows of 10.
  const std::vector<int64_t> lengths = {5, 3, 8, 2, 7, 1};
  Result<PackPlan> p = PlanPacking(lengths, 10, PackAlgorithm::kFirstFitDecreasing, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Rows(*p), (std::vector<std::vector<int64_t>>{{2, 3}, {4, 1}, {0, 5}}));
  EXPECT_EQ(p->tokens, 26);
  EXPECT_DOUBLE_EQ(p->padding_fraction(), 1.0 - 26.0 / 30.0);
}

TEST(PlanPacking, BestFitTakesTheFullestRowThatFits) {
  // Rows of 10 after 6 (doc 0) and 5 (doc 1): rooms 4 and 5. A 4 (doc 2) goes
  // to the room of 4 (best fit), where first fit would take the first row too;
  // then a 3 (doc 3): best fit the room of 5, and so on.
  const std::vector<int64_t> lengths = {6, 5, 4, 3, 2};
  Result<PackPlan> best = PlanPacking(lengths, 10, PackAlgorithm::kBestFitDecreasing, false);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(Rows(*best), (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3, 4}}));
  // 7 then 6: rooms 3 and 4; the 4 fits only the second row, then the 3 only the first.
  const std::vector<int64_t> other = {6, 7, 4, 3};
  Result<PackPlan> ff = PlanPacking(other, 10, PackAlgorithm::kFirstFitDecreasing, false);
  Result<PackPlan> bf = PlanPacking(other, 10, PackAlgorithm::kBestFitDecreasing, false);
  EXPECT_EQ(Rows(*ff), (std::vector<std::vector<int64_t>>{{1, 3}, {0, 2}}));
  EXPECT_EQ(Rows(*bf), (std::vector<std::vector<int64_t>>{{1, 3}, {0, 2}}));
}

TEST(PlanPacking, LongDocumentsAreRefusedOrCutAndEmptyOnesLeftOut) {
  const std::vector<int64_t> lengths = {3, 12, 0, 4};
  Result<PackPlan> refused = PlanPacking(lengths, 8, PackAlgorithm::kFirstFitDecreasing, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("document 1 holds 12 tokens"), std::string::npos);
  Result<PackPlan> cut = PlanPacking(lengths, 8, PackAlgorithm::kFirstFitDecreasing, true);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(Rows(*cut), (std::vector<std::vector<int64_t>>{{1}, {3, 0}}));
  EXPECT_EQ(cut->tokens, 15);
  EXPECT_FALSE(PlanPacking(lengths, 0, PackAlgorithm::kBestFitDecreasing, true).ok());
  EXPECT_FALSE(ParsePackAlgorithm("next_fit").ok());
}

}  // namespace
}  // namespace stoker
