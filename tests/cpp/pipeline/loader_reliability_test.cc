// The Loader's threads end to end on scalar samples (no codec): skip and
// refill under many thread settings, the budget, resume of the refill state,
// and teardown mid-epoch. Also the workload of the TSan run (scripts/sanitize.sh).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "formats/tar.h"
#include "stoker/loader.h"

namespace stoker {
namespace {

// 3 shards x 20 samples "k<i>.cls" = "<i>"; samples in `bad` hold "x" instead.
std::string MakeShards(const std::set<int>& bad) {
  char tmpl[] = "/tmp/stoker-loader-rel-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  for (int s = 0; s < 3; ++s) {
    auto w = TarWriter::Create(dir + "/s" + std::to_string(s) + ".tar");
    EXPECT_TRUE(w.ok());
    for (int i = s * 20; i < (s + 1) * 20; ++i) {
      std::string v = bad.count(i) ? "x" : std::to_string(i);
      EXPECT_TRUE(w->Add("k" + std::to_string(i) + ".cls", {reinterpret_cast<const uint8_t*>(v.data()), v.size()})
                      .ok());
    }
    EXPECT_TRUE(w->Close().ok());
  }
  return dir + "/s{0..2}.tar";
}

LoaderOptions Options(const std::string& shards, int threads, int io, int prefetch) {
  LoaderOptions o;
  o.sources = {shards};
  o.fields = {ScalarField("cls", DType::kI64)};
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 5;
  o.decode_threads = threads;
  o.io_depth = io;
  o.prefetch_batches = prefetch;
  o.on_error = OnError::kSkip;
  return o;
}

std::vector<int64_t> Drain(Loader& l, int64_t max_batches = -1) {
  std::vector<int64_t> out;
  for (int64_t b = 0; max_batches < 0 || b < max_batches; ++b) {
    auto batch = l.Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || !*batch) break;
    const ArrayView& cls = (*batch)->arrays()[0];
    EXPECT_EQ((*batch)->size(), 4);
    for (int i = 0; i < (*batch)->size(); ++i) {
      int64_t v;
      std::memcpy(&v, cls.data + 8 * i, 8);
      out.push_back(v);
    }
  }
  return out;
}

TEST(LoaderReliabilityTest, SkipRefillsDeterministicallyOnAnyThreadCount) {
  const std::string shards = MakeShards({3, 22, 41, 59});
  std::vector<int64_t> first;
  for (auto [t, io, p] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {4, 4, 2}, {2, 8, 5}, {3, 2, 3}}) {
    auto l = Loader::Create(Options(shards, t, io, p));
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    std::vector<int64_t> got = Drain(**l);
    ASSERT_EQ(got.size(), 60u);
    std::set<int64_t> distinct(got.begin(), got.end());
    EXPECT_EQ(distinct.size(), 56u);
    for (int b : {3, 22, 41, 59}) EXPECT_EQ(distinct.count(b), 0u);
    EXPECT_EQ((*l)->Skips().skipped, 4);
    EXPECT_EQ((*l)->TakeSkipLog().size(), 4u);
    if (first.empty()) first = got;
    EXPECT_EQ(got, first);
  }
}

TEST(LoaderReliabilityTest, BudgetTripsWithItsName) {
  LoaderOptions o = Options(MakeShards({1, 2, 3}), 2, 2, 2);
  o.max_skips = 2;
  auto l = Loader::Create(o);
  ASSERT_TRUE(l.ok());
  Status last;
  for (int i = 0; i < 15; ++i) {
    auto b = (*l)->Next();
    if (!b.ok()) last = b.status();
  }
  EXPECT_NE(last.message().find("max_skips=2"), std::string::npos) << last.ToString();
}

TEST(LoaderReliabilityTest, StateMidEpochRestoresTheRefillCursor) {
  const std::string shards = MakeShards({0, 5, 10, 33});
  auto ref = Loader::Create(Options(shards, 2, 2, 2));
  ASSERT_TRUE(ref.ok());
  const std::vector<int64_t> want = Drain(**ref);
  for (int64_t cut : {0, 1, 4, 9, 15}) {
    auto a = Loader::Create(Options(shards, 3, 1, 1));
    ASSERT_TRUE(a.ok());
    std::vector<int64_t> got = Drain(**a, cut);
    const std::string state = (*a)->State();
    a->reset();  // mid-epoch teardown with threads running
    auto b = Loader::Create(Options(shards, 1, 4, 3));
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE((*b)->Restore(state).ok());
    std::vector<int64_t> rest = Drain(**b);
    got.insert(got.end(), rest.begin(), rest.end());
    EXPECT_EQ(got, want) << "cut at batch " << cut;
  }
}

// Loaders that make alternate batches (batch_stride 2, as Ray workers) leave
// the bad samples' slots and name them; a loader of none of the batches
// (batch_share 0) receives every batch in order and refills them: the local
// loader's stream, counts and skip log, over two epochs.
TEST(LoaderReliabilityTest, SharesLeaveFailedSlotsAndTheReceiverRefillsThem) {
  const std::string shards = MakeShards({3, 22, 41, 59});
  auto local = Loader::Create(Options(shards, 2, 2, 2));
  ASSERT_TRUE(local.ok());
  std::vector<int64_t> want;
  for (uint64_t epoch : {0, 1}) {
    ASSERT_TRUE((*local)->SetEpoch(epoch).ok());
    std::vector<int64_t> got = Drain(**local);
    want.insert(want.end(), got.begin(), got.end());
  }

  LoaderOptions strided = Options(shards, 2, 2, 2);
  strided.batch_stride = 2;
  Result<std::unique_ptr<Loader>> refused = Loader::Create(strided);
  ASSERT_FALSE(refused.ok());  // its own refills would come from its batches, not the rank's
  EXPECT_NE(refused.status().message().find("leave_failed_slots"), std::string::npos);
  strided.leave_failed_slots = true;
  std::vector<std::unique_ptr<Loader>> parts;
  for (int j : {0, 1}) {
    strided.batch_offset = j;
    auto part = Loader::Create(strided);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    parts.push_back(std::move(*part));
  }
  LoaderOptions none = Options(shards, 1, 1, 1);
  none.batch_share = 0;
  auto receiver = Loader::Create(none);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  EXPECT_EQ((*receiver)->plan().batches, 0);

  std::vector<int64_t> got;
  size_t left = 0;
  for (uint64_t epoch : {0, 1}) {
    ASSERT_TRUE((*receiver)->SetEpoch(epoch).ok());
    for (auto& part : parts) ASSERT_TRUE(part->SetEpoch(epoch).ok());
    for (int64_t b = 0; b < 15; ++b) {
      auto made = parts[b % 2]->Next();
      ASSERT_TRUE(made.ok() && *made) << made.status().ToString();
      ReceivedBatch in{b, (*made)->arrays(), (*made)->keys(), (*made)->urls(), (*made)->failures()};
      left += in.failures.size();
      auto done = (*receiver)->Receive(std::move(in));
      ASSERT_TRUE(done.ok()) << done.status().ToString();
      const ArrayView& cls = (*done)->arrays()[0];
      for (int i = 0; i < (*done)->size(); ++i) {
        int64_t v;
        std::memcpy(&v, cls.data + 8 * i, 8);
        got.push_back(v);
      }
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(left, 8u);  // each bad sample's own slot, once an epoch
  EXPECT_EQ((*receiver)->Skips().skipped, (*local)->Skips().skipped);
  EXPECT_EQ((*receiver)->Skips().refilled, (*local)->Skips().refilled);
  EXPECT_EQ((*receiver)->Skips().seen, (*local)->Skips().seen);
  EXPECT_EQ((*receiver)->TakeSkipLog().size(), (*local)->TakeSkipLog().size());
  for (auto& part : parts) EXPECT_EQ(part->Skips().skipped, 0);
}

TEST(LoaderReliabilityTest, StopAndDestroyMidEpochRepeatedly) {
  const std::string shards = MakeShards({});
  for (int i = 0; i < 20; ++i) {
    auto l = Loader::Create(Options(shards, 1 + i % 4, 1 + i % 3, 1 + i % 2));
    ASSERT_TRUE(l.ok());
    Drain(**l, i % 5);
    if (i % 2) (*l)->Stop();
  }
}

}  // namespace
}  // namespace stoker
