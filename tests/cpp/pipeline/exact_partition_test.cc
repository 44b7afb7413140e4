// The exact partition (PartitionPolicy::kExact): every sample of the epoch on
// exactly one rank, nothing dropped or repeated, every rank the same number
// of batches, a rank's last batch short or empty. Checked against the
// dataset's own sample ids (0..N-1) and hand-computed shares, in the planner,
// in elastic resume, and end to end through the Loader's threads, where an
// empty batch must still be delivered (nothing counts it down).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "formats/tar.h"
#include "pipeline/elastic.h"
#include "pipeline/planner.h"
#include "stoker/loader.h"

namespace stoker {
namespace {

// A plan's samples in delivery order (plans keep no list: At computes each).
std::vector<SampleRef> Refs(const EpochPlan& p) {
  std::vector<SampleRef> v;
  for (int64_t i = 0; i < p.info.rank_samples; ++i) v.push_back(p.At(i));
  return v;
}

LoaderOptions Exact(int world, int rank, int bs, bool shuffle) {
  LoaderOptions o;
  o.world_size = world;
  o.rank = rank;
  o.batch_size = bs;
  o.shuffle = shuffle;
  o.seed = 11;
  o.partition = PartitionPolicy::kExact;
  o.drop_last = false;
  return o;
}

// Batch b's rows on a rank of `samples` samples (as EpochRun sizes it).
int64_t Rows(int64_t samples, int64_t b, int64_t bs) { return std::clamp<int64_t>(samples - b * bs, 0, bs); }

TEST(ExactPartitionTest, EverySampleOnceAndEqualBatchesForAnyWorld) {
  // 103 = 1 + 8 * 12 + 6 samples: no world size from 2 to 9 divides it except 103 itself.
  const std::vector<uint32_t> shards = {1, 8, 40, 6, 48};
  for (bool shuffle : {false, true}) {
    for (int world : {1, 2, 3, 4, 5, 7, 9, 103, 110}) {
      for (int bs : {1, 3, 8, 64}) {
        std::vector<uint64_t> joined;
        std::vector<int64_t> counts;
        int64_t batches = -1;
        for (int r = 0; r < world; ++r) {
          auto plan = PlanEpoch(shards, Exact(world, r, bs, shuffle), 2);
          ASSERT_TRUE(plan.ok()) << plan.status().ToString();
          if (r == 0) batches = plan->info.batches;
          EXPECT_EQ(plan->info.batches, batches) << "world " << world << " bs " << bs;
          EXPECT_EQ(plan->info.dropped_samples, 0);
          EXPECT_EQ(plan->info.padded_samples, 0);
          counts.push_back(plan->info.rank_samples);
          for (const SampleRef& s : Refs(*plan)) joined.push_back(s.global);
          // Only the last batch may be short; it is never more than one sample
          // shorter than another rank's last batch.
          for (int64_t b = 0; b + 1 < batches; ++b) EXPECT_EQ(Rows(plan->info.rank_samples, b, bs), bs);
        }
        std::vector<uint64_t> sorted = joined;
        std::sort(sorted.begin(), sorted.end());
        ASSERT_EQ(sorted.size(), 103u) << "world " << world << " bs " << bs;
        for (uint64_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], i);
        // Rank parts are contiguous in rank order: together they are the one-rank order.
        auto whole = PlanEpoch(shards, Exact(1, 0, 1, shuffle), 2);
        ASSERT_TRUE(whole.ok());
        std::vector<uint64_t> order;
        for (const SampleRef& s : Refs(*whole)) order.push_back(s.global);
        EXPECT_EQ(joined, order);
        const int64_t most = *std::max_element(counts.begin(), counts.end());
        EXPECT_LE(most - *std::min_element(counts.begin(), counts.end()), 1);
        EXPECT_EQ(batches, (most + bs - 1) / bs) << "the steps the largest share needs, no more";
      }
    }
  }
}

TEST(ExactPartitionTest, HandComputedShares) {
  const std::vector<uint32_t> shards = {103};
  // 103 over 4 ranks in batches of 8: 26, 26, 26, 25 samples, 4 steps; last batches 2, 2, 2, 1.
  const int64_t want4[] = {26, 26, 26, 25};
  for (int r = 0; r < 4; ++r) {
    auto plan = PlanEpoch(shards, Exact(4, r, 8, false), 0);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->info.rank_samples, want4[r]);
    EXPECT_EQ(plan->info.batches, 4);
    EXPECT_EQ(plan->At(0).global, static_cast<uint64_t>(26 * r));
  }
  // 103 over 3: 35, 34, 34; 5 steps; last batches 3, 2, 2.
  const int64_t want3[] = {35, 34, 34};
  for (int r = 0; r < 3; ++r) {
    auto plan = PlanEpoch(shards, Exact(3, r, 8, false), 0);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->info.rank_samples, want3[r]);
    EXPECT_EQ(plan->info.batches, 5);
  }
  // 17 over 2 in batches of 8: 9 and 8 samples, 2 steps: rank 1's second batch is empty.
  auto r1 = PlanEpoch({17}, Exact(2, 1, 8, false), 0);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->info.rank_samples, 8);
  EXPECT_EQ(r1->info.batches, 2);
  EXPECT_EQ(Rows(r1->info.rank_samples, 1, 8), 0);
  // Fewer samples than ranks: the drop policy refuses, exact gives ranks 3 and 4 nothing.
  LoaderOptions drop = Exact(5, 4, 2, false);
  drop.partition = PartitionPolicy::kDropRemainder;
  EXPECT_FALSE(PlanEpoch({3}, drop, 0).ok());
  for (int r = 0; r < 5; ++r) {
    auto plan = PlanEpoch({3}, Exact(5, r, 2, false), 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->info.rank_samples, r < 3 ? 1 : 0);
    EXPECT_EQ(plan->info.batches, 1);
  }
}

TEST(ExactPartitionTest, RefusesDropLast) {
  LoaderOptions o = Exact(3, 0, 8, true);
  o.drop_last = true;
  auto plan = PlanEpoch({103}, o, 0);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().ToString().find("drop_last must be false"), std::string::npos)
      << plan.status().ToString();
}

TEST(ExactPartitionTest, ElasticResumeDeliversTheRestOnceOnAnotherWorld) {
  const std::vector<uint32_t> shards = {50, 53};
  for (auto [old_world, new_world, step] : std::vector<std::tuple<int, int, int64_t>>{
           {4, 3, 2}, {3, 4, 1}, {4, 7, 3}, {2, 5, 0}, {3, 2, 4}}) {
    const int bs = 8;
    std::multiset<uint64_t> seen;
    for (int r = 0; r < old_world; ++r) {  // what the old ranks delivered before the save
      auto plan = PlanEpoch(shards, Exact(old_world, r, bs, true), 5);
      ASSERT_TRUE(plan.ok());
      const int64_t done = std::min<int64_t>(plan->info.rank_samples, step * bs);
      for (int64_t i = 0; i < done; ++i) seen.insert(plan->At(i).global);
    }
    int64_t batches = -1;
    for (int r = 0; r < new_world; ++r) {
      auto rest = PlanRemaining(shards, Exact(new_world, r, bs, true), 5, {{old_world, step}});
      ASSERT_TRUE(rest.ok()) << rest.status().ToString();
      if (r == 0) batches = rest->info.batches;
      EXPECT_EQ(rest->info.batches, batches);
      EXPECT_EQ(rest->info.dropped_samples, 0);
      for (const SampleRef& s : Refs(*rest)) seen.insert(s.global);
    }
    ASSERT_EQ(seen.size(), 103u) << old_world << " -> " << new_world << " at step " << step;
    EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 103u) << "a sample twice";
  }
}

// megatron's MegatronPretrainingSampler, written out as it loops: indices
// from consumed gathered into global batches of micro * world; rank r yields
// its slice [r * micro, (r + 1) * micro) of each (a Python slice: clamped),
// and with drop_last=False also of the partial last one, even when empty.
std::vector<std::vector<uint64_t>> MegatronSampler(uint64_t total, uint64_t consumed, uint64_t micro, int world,
                                                   int rank, bool drop_last) {
  std::vector<std::vector<uint64_t>> out;
  std::vector<uint64_t> batch;
  auto slice = [&] {
    const size_t begin = std::min<size_t>(batch.size(), rank * micro);
    const size_t end = std::min<size_t>(batch.size(), (rank + 1) * micro);
    out.emplace_back(batch.begin() + static_cast<long>(begin), batch.begin() + static_cast<long>(end));
  };
  for (uint64_t idx = consumed; idx < total; ++idx) {
    batch.push_back(idx);
    if (batch.size() == micro * static_cast<uint64_t>(world)) {
      slice();
      batch.clear();
    }
  }
  if (!batch.empty() && !drop_last) slice();
  return out;
}

TEST(ExactPartitionTest, TokenRunsFollowMegatronsSamplerWithoutDropLast) {
  for (auto [total, consumed, micro, world] : std::vector<std::tuple<int64_t, int64_t, int, int>>{
           {103, 0, 8, 3}, {103, 0, 8, 4}, {100, 24, 4, 3}, {96, 0, 8, 4}, {5, 0, 2, 4}, {103, 100, 2, 2}}) {
    for (bool exact : {false, true}) {
      for (int r = 0; r < world; ++r) {
        LoaderOptions o = Exact(world, r, micro, false);
        if (!exact) o.partition = PartitionPolicy::kDropRemainder;
        auto plan = PlanTokenRun(total, consumed, o);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        const auto want = MegatronSampler(total, consumed, micro, world, r, /*drop_last=*/!exact);
        ASSERT_EQ(plan->info.batches, static_cast<int64_t>(want.size())) << total << "/" << world << " rank " << r;
        int64_t i = 0;
        for (int64_t b = 0; b < plan->info.batches; ++b) {
          const auto& batch = want[static_cast<size_t>(b)];
          ASSERT_EQ(Rows(plan->info.rank_samples, b, micro), static_cast<int64_t>(batch.size()));
          for (uint64_t g : batch) EXPECT_EQ(plan->At(i++).global, g);
        }
        if (exact) {
          EXPECT_EQ(plan->info.dropped_samples, 0);
        }
      }
    }
  }
}

// 3 shards x 20 scalar samples "k<i>.cls" = "<i>": 60 samples.
std::string MakeShards() {
  char tmpl[] = "/tmp/stoker-exact-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  for (int s = 0; s < 3; ++s) {
    auto w = TarWriter::Create(dir + "/s" + std::to_string(s) + ".tar");
    EXPECT_TRUE(w.ok());
    for (int i = s * 20; i < (s + 1) * 20; ++i) {
      std::string v = std::to_string(i);
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(v.data()), v.size()})
                      .ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return dir + "/s{0..2}.tar";
}

TEST(ExactPartitionTest, LoaderDeliversShortAndEmptyLastBatchesOverEpochs) {
  // 60 samples over 7 ranks in batches of 4: ranks 0-3 hold 9 (4, 4, 1),
  // ranks 4-6 hold 8 (4, 4, 0): their third batch is empty and must still
  // arrive, with or without read-ahead (the two ways a batch gets its buffer),
  // and the next epoch must follow it.
  const std::string shards = MakeShards();
  for (auto [threads, prefetch, read_ahead] :
       std::vector<std::tuple<int, int, int>>{{1, 1, 0}, {2, 2, 0}, {2, 1, 2}, {3, 3, 3}}) {
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < 7; ++r) {
        LoaderOptions o = Exact(7, r, 4, true);
        o.sources = {shards};
        o.fields = {ScalarField("cls", DType::kI64)};
        o.decode_threads = threads;
        o.prefetch_batches = prefetch;
        o.read_ahead_batches = read_ahead;
        o.timeout_ms = 10000;  // a batch nobody finishes fails the test instead of hanging it
        auto l = Loader::Create(o);
        ASSERT_TRUE(l.ok()) << l.status().ToString();
        // Epoch 1 is reached through epoch 0's end, as a training loop does.
        for (uint64_t e = 0; e <= epoch; ++e) {
          ASSERT_TRUE((*l)->SetEpoch(e).ok());
          std::vector<int> sizes;
          while (true) {
            auto batch = (*l)->Next();
            ASSERT_TRUE(batch.ok()) << batch.status().ToString();
            if (!*batch) break;
            sizes.push_back((*batch)->size());
            const ArrayView& cls = (*batch)->arrays()[0];
            EXPECT_EQ(cls.shape, std::vector<int64_t>{(*batch)->size()});
            EXPECT_EQ((*batch)->keys().size(), static_cast<size_t>((*batch)->size()));
            for (int i = 0; i < (*batch)->size() && e == epoch; ++i) {
              int64_t v;
              std::memcpy(&v, cls.data + 8 * i, 8);
              seen.insert(v);
            }
          }
          EXPECT_EQ(sizes, (r < 4 ? std::vector<int>{4, 4, 1} : std::vector<int>{4, 4, 0})) << "rank " << r;
        }
      }
      ASSERT_EQ(seen.size(), 60u) << "threads " << threads << " read_ahead " << read_ahead;
      std::vector<int64_t> sorted(seen.begin(), seen.end());
      for (int64_t i = 0; i < 60; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
    }
  }
}

TEST(ExactPartitionTest, StateRestoresAfterTheEmptyBatchAndNamesThePolicy) {
  const std::string shards = MakeShards();
  LoaderOptions o = Exact(7, 6, 4, true);
  o.sources = {shards};
  o.fields = {ScalarField("cls", DType::kI64)};
  o.timeout_ms = 10000;
  auto a = Loader::Create(o);
  ASSERT_TRUE(a.ok());
  for (int b = 0; b < 2; ++b) {
    auto batch = (*a)->Next();
    ASSERT_TRUE(batch.ok() && *batch);
  }
  const std::string state = (*a)->State();  // before batch 2, the empty one
  EXPECT_NE(state.find("\"partition\":\"exact\""), std::string::npos) << state;
  auto b = Loader::Create(o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Restore(state).ok());
  auto last = (*b)->Next();
  ASSERT_TRUE(last.ok() && *last);
  EXPECT_EQ((*last)->size(), 0);
  EXPECT_EQ((*last)->index(), 2);
  auto end = (*b)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(*end);
  // The drop policy cuts the epoch otherwise: its loader refuses an exact state.
  LoaderOptions drop = o;
  drop.partition = PartitionPolicy::kDropRemainder;
  drop.drop_last = true;
  auto c = Loader::Create(drop);
  ASSERT_TRUE(c.ok());
  Status st = (*c)->Restore(state);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("partition"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace stoker
