// Tests for formats/sample_index: both key rules, grouping errors, and the
// JSON sidecar (schema, round trip, when it is used and when it is not).
#include "formats/sample_index.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "formats/tar_bytes.h"

namespace stoker {
namespace {

using testing::TempPath;

// Members laid out as a tar would: 512-byte header, data padded to 512.
std::vector<TarMember> Members(const std::vector<std::pair<std::string, uint64_t>>& files) {
  std::vector<TarMember> out;
  uint64_t off = 0;
  for (auto& [name, size] : files) {
    out.push_back({name, off, off + 512, size});
    off += 512 + (size + 511) / 512 * 512;
  }
  return out;
}

std::vector<std::string> Fields(const SampleEntry& s) {
  std::vector<std::string> f;
  for (const MemberRef& m : s.members) f.push_back(m.field);
  return f;
}

using Strings = std::vector<std::string>;

TEST(SampleIndexTest, WebDatasetKeysAreUpToTheFirstDotOfTheBasename) {
  auto members = Members({{"a.b/x.seg.png", 10}, {"a.b/x.jpg", 20}, {"a.b/y.jpg", 30}, {"README", 5}, {"z.cls", 1}});
  auto r = GroupSamples(members, KeyRule::kWebDataset, "s.tar");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);  // the dotless README belongs to no sample
  EXPECT_EQ((*r)[0].key, "a.b/x");
  EXPECT_EQ(Fields((*r)[0]), (Strings{"seg.png", "jpg"}));
  EXPECT_EQ((*r)[0].begin, members[0].header_offset);
  EXPECT_EQ((*r)[0].end, members[1].data_offset + 20);
  EXPECT_EQ((*r)[1].key, "a.b/y");
  EXPECT_EQ((*r)[2].key, "z");
  ASSERT_NE((*r)[0].Find("jpg"), nullptr);
  EXPECT_EQ((*r)[0].Find("jpg")->offset, members[1].data_offset);
  EXPECT_EQ((*r)[0].Find("jpg")->name, "a.b/x.jpg");
  EXPECT_EQ((*r)[0].Find("png"), nullptr);
}

TEST(SampleIndexTest, UnderscoreRuleJoinsSuffixedMembersInEitherOrder) {
  auto members = Members({{"sa_1.jpg", 100},
                          {"sa_1_features.npz", 50},
                          {"sa_2_features.npz", 60},  // features first
                          {"sa_2.jpg", 70},
                          {"sa_2.json", 3},
                          {"sa_10.jpg", 80},  // "sa_10" is not "sa_1" + "_0"
                          {"sa_11_features.npz", 9}});
  auto r = GroupSamples(members, KeyRule::kUnderscoreSuffix, "sa.tar");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].key, "sa_1");
  EXPECT_EQ(Fields((*r)[0]), (Strings{"jpg", "features.npz"}));
  EXPECT_EQ((*r)[1].key, "sa_2");
  EXPECT_EQ(Fields((*r)[1]), (Strings{"features.npz", "jpg", "json"}));
  EXPECT_EQ((*r)[1].begin, members[2].header_offset);
  EXPECT_EQ((*r)[1].end, members[4].data_offset + 3);
  EXPECT_EQ((*r)[1].Find("features.npz")->name, "sa_2_features.npz");
  EXPECT_EQ((*r)[2].key, "sa_10");
  EXPECT_EQ(Fields((*r)[2]), (Strings{"jpg"}));
  EXPECT_EQ((*r)[3].key, "sa_11_features");  // alone, it is its own sample
  EXPECT_EQ(Fields((*r)[3]), (Strings{"npz"}));
}

TEST(SampleIndexTest, WebDatasetRuleDoesNotJoinUnderscoreSuffixes) {
  auto r = GroupSamples(Members({{"sa_1.jpg", 1}, {"sa_1_features.npz", 1}}), KeyRule::kWebDataset, "s.tar");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].key, "sa_1_features");
}

TEST(SampleIndexTest, KeySeenAgainAfterOtherKeysIsDataLoss) {
  auto members = Members({{"a.jpg", 1}, {"b.jpg", 1}, {"a.cls", 1}});
  auto r = GroupSamples(members, KeyRule::kWebDataset, "shard-7.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("shard-7.tar"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a.cls"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset " + std::to_string(members[2].header_offset)), std::string::npos) << msg;

  // Under the underscore rule, a suffixed member of a finished sample, in
  // either order, is that sample's key coming back.
  using Files = std::vector<std::pair<std::string, uint64_t>>;
  for (const Files& files : {Files{{"sa_1.jpg", 1}, {"sa_2.jpg", 1}, {"sa_1_features.npz", 1}},
                             Files{{"sa_1_features.npz", 1}, {"sa_2.jpg", 1}, {"sa_1.jpg", 1}},
                             Files{{"sa_1_features.npz", 1}, {"sa_2.jpg", 1}, {"sa_1_features.npz", 1}}}) {
    auto u = GroupSamples(Members(files), KeyRule::kUnderscoreSuffix, "s.tar");
    ASSERT_FALSE(u.ok()) << files[2].first;
    EXPECT_EQ(u.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(u.status().message().find(files[2].first), std::string::npos) << u.status().message();
  }
  // Under the webdataset rule the first layout is three unrelated samples.
  EXPECT_TRUE(
      GroupSamples(Members({{"sa_1.jpg", 1}, {"sa_2.jpg", 1}, {"sa_1_features.npz", 1}}), KeyRule::kWebDataset, "s.tar")
          .ok());
}

TEST(SampleIndexTest, FieldTwiceInASampleIsDataLoss) {
  auto members = Members({{"a.jpg", 1}, {"a.cls", 1}, {"a.jpg", 1}});
  auto r = GroupSamples(members, KeyRule::kWebDataset, "s.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("'jpg'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("offset " + std::to_string(members[2].header_offset)), std::string::npos);

  auto u = GroupSamples(Members({{"sa_1_features.npz", 1}, {"sa_1.jpg", 1}, {"sa_1_features.npz", 1}}),
                        KeyRule::kUnderscoreSuffix, "s.tar");
  EXPECT_EQ(u.status().code(), StatusCode::kDataLoss);
}

TEST(SampleIndexTest, FieldsMatchMembersByWebDatasetsRule) {
  // webdataset lowercases suffixes and decodes jpg and jpeg alike: field "jpg"
  // reads "x.JPEG" and "x.jpeg", "png" reads "x.PNG"; an exact field wins.
  auto r = GroupSamples(Members({{"x.JPEG", 1}, {"x.PNG", 2}, {"x.seg.Jpeg", 3}, {"x.cls", 4}}),
                        KeyRule::kWebDataset, "s.tar");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SampleEntry& x = (*r)[0];
  ASSERT_NE(x.Find("jpg"), nullptr);
  EXPECT_EQ(x.Find("jpg")->name, "x.JPEG");
  EXPECT_EQ(x.Find("jpeg")->name, "x.JPEG");
  EXPECT_EQ(x.Find("png")->name, "x.PNG");
  EXPECT_EQ(x.Find("seg.jpg")->name, "x.seg.Jpeg");
  EXPECT_EQ(x.Find("cls")->name, "x.cls");
  EXPECT_EQ(x.Find("jp"), nullptr);
  EXPECT_EQ(x.Find("seg"), nullptr);
  EXPECT_EQ(x.FindExact("jpg"), nullptr);

  auto both = GroupSamples(Members({{"y.jpeg", 1}, {"y.jpg", 2}}), KeyRule::kWebDataset, "s.tar");
  ASSERT_TRUE(both.ok()) << both.status().ToString();  // distinct fields: not a duplicate
  EXPECT_EQ((*both)[0].Find("jpg")->name, "y.jpg");
  EXPECT_EQ((*both)[0].Find("jpeg")->name, "y.jpeg");
}

TEST(SampleTable, AliasesReadAFieldFromTheSourcesOwnMember) {
  // A mixture's source names its image "jpeg" and its label "label.cls": the
  // loader's fields "jpg" and "cls" find them, the member keeps its own name
  // for messages, an owning copy keeps the aliases, and a table without them
  // is untouched.
  auto r = GroupSamples(Members({{"x.jpeg", 1}, {"x.label.cls", 2}, {"x.cls", 3}}), KeyRule::kWebDataset, "s.tar");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  SampleTable table(*r);
  EXPECT_EQ(table[0].Find("cls")->name(), "x.cls");
  table.SetAliases(std::make_shared<const FieldAliases>(FieldAliases{{"cls", "label.cls"}, {"jpg", "jpeg"}}));
  EXPECT_EQ(table[0].Find("cls")->name(), "x.label.cls");
  EXPECT_EQ(table[0].Find("jpg")->name(), "x.jpeg");
  EXPECT_EQ(table[0].members.MemberFieldFor("cls"), "label.cls");
  EXPECT_EQ(table[0].members.MemberFieldFor("txt"), "txt");
  const SampleEntry copy = table[0].ToEntry();
  EXPECT_EQ(copy.Find("cls")->name, "x.label.cls");
  EXPECT_EQ(copy.view().Find("cls")->name(), "x.label.cls");
}

TEST(SampleIndexTest, KeyRuleNamesRoundTrip) {
  for (KeyRule rule : {KeyRule::kWebDataset, KeyRule::kUnderscoreSuffix}) {
    auto r = ParseKeyRule(KeyRuleName(rule));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, rule);
  }
  EXPECT_EQ(ParseKeyRule("nope").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(IndexPathFor("/d/shard.tar"), "/d/shard.tar.idx");
  // A URL's query stays after the name (io/url.h): a signed link's sidecar is signed alike.
  EXPECT_EQ(IndexPathFor("https://h/a.tar?token=x"), "https://h/a.tar.idx?token=x");
  EXPECT_EQ(IndexPathFor("/d/odd?.tar"), "/d/odd?.tar.idx");  // a local name's '?' is a character
}

std::string WriteShard(const std::string& name) {
  std::string path = TempPath(name);
  auto w = TarWriter::Create(path);
  EXPECT_TRUE(w.ok());
  auto add = [&](const std::string& member, const std::string& data) {
    EXPECT_TRUE(w->Add(member, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}).ok());
  };
  add("sa_1.jpg", "jpeg-1");
  add("sa_1_features.npz", "npz-1");
  add("sa_2_features.npz", "npz-2");
  add("sa_2.jpg", "jpeg-two");
  EXPECT_TRUE(w->Close().ok());
  std::remove(IndexPathFor(path).c_str());
  return path;
}

TEST(SampleIndexTest, SidecarRoundTripsAndFollowsTheSchema) {
  std::string shard = WriteShard("idx_roundtrip.tar");
  auto built = LoadOrBuildShardIndex(shard, KeyRule::kUnderscoreSuffix);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(built->samples.size(), 2u);
  EXPECT_EQ(built->shard_path, shard);
  EXPECT_EQ(built->shard_size, testing::ReadFileBytes(shard).size());
  std::string bytes = testing::ReadFileBytes(shard);
  std::optional<MemberView> f = built->samples[1].Find("features.npz");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(bytes.substr(f->offset, f->size), "npz-2");

  std::string idx = IndexPathFor(shard);
  ASSERT_TRUE(WriteShardIndex(*built, idx).ok());
  auto doc = nlohmann::json::parse(testing::ReadFileBytes(idx), nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["format"], "stoker-index");
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["shard_size"], built->shard_size);
  EXPECT_EQ(doc["key_rule"], "underscore");
  const auto& s0 = doc["samples"][0];
  EXPECT_EQ(s0[0], "sa_1");
  EXPECT_EQ(s0[1], built->samples[0].begin);
  EXPECT_EQ(s0[2], built->samples[0].end);
  EXPECT_EQ(s0[3][1][0], "features.npz");
  EXPECT_EQ(s0[3][1][1], "sa_1_features.npz");
  EXPECT_EQ(s0[3][1][2], built->samples[0].members[1].offset);
  EXPECT_EQ(s0[3][1][3], 5);

  auto back = ReadShardIndex(idx);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->shard_size, built->shard_size);
  EXPECT_EQ(back->key_rule, KeyRule::kUnderscoreSuffix);
  ASSERT_EQ(back->samples.size(), built->samples.size());
  for (size_t i = 0; i < back->samples.size(); ++i) {
    const SampleView a = back->samples[i], b = built->samples[i];
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.begin, b.begin);
    EXPECT_EQ(a.end, b.end);
    ASSERT_EQ(a.members.size(), b.members.size());
    for (size_t k = 0; k < a.members.size(); ++k) {
      EXPECT_EQ(a.members[k].field, b.members[k].field);
      EXPECT_EQ(a.members[k].name(), b.members[k].name());
      EXPECT_EQ(a.members[k].offset, b.members[k].offset);
      EXPECT_EQ(a.members[k].size, b.members[k].size);
    }
  }
}

TEST(SampleIndexTest, LoadUsesAMatchingSidecarAndScansOtherwise) {
  std::string shard = WriteShard("idx_use.tar");
  auto built = LoadOrBuildShardIndex(shard, KeyRule::kUnderscoreSuffix);
  ASSERT_TRUE(built.ok());
  // Mark the sidecar so that its use is visible.
  ShardIndex marked = *built;
  std::vector<SampleEntry> entries;
  for (SampleView s : marked.samples) entries.push_back(s.ToEntry());
  entries[0].key = "from-sidecar";
  marked.samples = SampleTable(entries);
  ASSERT_TRUE(WriteShardIndex(marked, IndexPathFor(shard)).ok());

  auto loaded = LoadOrBuildShardIndex(shard, KeyRule::kUnderscoreSuffix);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->samples[0].key, "from-sidecar");

  // Another key rule: the sidecar does not apply.
  auto other_rule = LoadOrBuildShardIndex(shard, KeyRule::kWebDataset);
  ASSERT_TRUE(other_rule.ok());
  EXPECT_EQ(other_rule->samples.size(), 4u);
  EXPECT_EQ(other_rule->samples[0].key, "sa_1");

  // A sidecar for a shard of another size is stale: scan instead.
  marked.shard_size += 1;
  ASSERT_TRUE(WriteShardIndex(marked, IndexPathFor(shard)).ok());
  auto stale = LoadOrBuildShardIndex(shard, KeyRule::kUnderscoreSuffix);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->samples[0].key, "sa_1");
}

TEST(SampleIndexTest, CorruptSidecarIsReported) {
  std::string shard = WriteShard("idx_corrupt.tar");
  std::string idx = IndexPathFor(shard);
  for (std::string text : {std::string("{not json"), std::string(R"({"format":"other","version":1})"),
                           std::string(R"({"format":"stoker-index","version":1,"shard_size":10,)"
                                       R"("key_rule":"webdataset","samples":[["k",0,99,[]]]})")}) {
    testing::WriteFile(idx, text);
    auto r = ReadShardIndex(idx);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(idx), std::string::npos);
    EXPECT_FALSE(LoadOrBuildShardIndex(shard, KeyRule::kWebDataset).ok());
  }
  std::remove(idx.c_str());
  EXPECT_EQ(ReadShardIndex(idx).status().code(), StatusCode::kNotFound);
}

// The sidecar is read in one pass (SAX): keys in any order, unknown keys
// (with nested values) ignored, and the header judged first even when a
// sample stops the parse before the header's later keys are read.
TEST(SampleIndexTest, SidecarKeysInAnyOrderAndTheHeaderJudgedFirst) {
  std::string shard = WriteShard("idx_order.tar");
  std::string idx = IndexPathFor(shard);
  testing::WriteFile(idx, R"({"version":1,"samples":[["a",0,10,[["bin","a.bin",512,8]]],["b",10,20,[]]],)"
                          R"("note":{"made by":["hand",{"x":[1,2]}]},"key_rule":"webdataset",)"
                          R"("format":"stoker-index","shard_size":20})");
  auto r = ReadShardIndex(idx);
  ASSERT_FALSE(r.ok());  // the member's offset 512 lies outside its sample [0, 10)
  EXPECT_NE(r.status().message().find("a member of sample 'a'"), std::string::npos) << r.status().ToString();

  testing::WriteFile(idx, R"({"version":1,"samples":[["a",0,10,[["bin","a.bin",2,8]]],["b",10,20,[]]],)"
                          R"("note":{"made by":["hand",{"x":[1,2]}]},"key_rule":"webdataset",)"
                          R"("format":"stoker-index","shard_size":20})");
  r = ReadShardIndex(idx);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[0].key, "a");
  EXPECT_EQ(r->samples[0].members[0].offset, 2u);
  EXPECT_EQ(r->samples[1].key, "b");
  EXPECT_EQ(r->samples[1].end, 20u);
  EXPECT_EQ(r->shard_size, 20u);

  // A later version whose samples this build cannot parse: the version is the error.
  testing::WriteFile(idx, R"({"format":"stoker-index","key_rule":"webdataset","samples":[{"key":"a"}],)"
                          R"("shard_size":20,"version":2})");
  r = ReadShardIndex(idx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("index version 2"), std::string::npos);

  // A sample past the shard's end, with shard_size after the samples.
  testing::WriteFile(idx, R"({"format":"stoker-index","key_rule":"webdataset","samples":[["a",0,10,[]],)"
                          R"(["b",10,30,[]]],"shard_size":20,"version":1})");
  r = ReadShardIndex(idx);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("sample #1"), std::string::npos) << r.status().ToString();
  std::remove(idx.c_str());
}

TEST(SampleIndexTest, NonUtf8NamesCannotBeIndexed) {
  ShardIndex index;
  index.shard_path = "x.tar";
  index.samples.push_back({"k", {{"jpg", "k\xff.jpg", 512, 1}}, 0, 513});
  Status s = WriteShardIndex(index, TempPath("bad_utf8.idx"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

// A SampleEntry holds a MemberRef per member: its inline bytes are one
// pointer, null for the members (nearly all) that have none.
TEST(SampleIndex, InlineBytesCostAPointerAndCopyAsValues) {
  static_assert(sizeof(InlineBytes) == sizeof(void*));
  static_assert(sizeof(MemberRef) <= 96, "a member record grew: every sample of every rank pays for it");
  MemberRef a{"cls", "x.cls", 0, 0};
  EXPECT_TRUE(a.inline_data.empty());
  EXPECT_EQ(a.inline_data.size(), 0u);
  EXPECT_EQ(a.inline_data.view(), "");
  a.inline_data = std::string("17");
  MemberRef b = a;  // a deep copy: each owns its bytes
  a.inline_data = "3";
  EXPECT_EQ(b.inline_data.view(), "17");
  EXPECT_EQ(a.inline_data.view(), "3");
  b = a;
  const MemberRef& same = b;
  b = same;  // assigning itself keeps its bytes
  EXPECT_EQ(b.inline_data.view(), "3");
  MemberRef c = std::move(b);
  EXPECT_EQ(c.inline_data.view(), "3");
  c.inline_data = std::string_view();
  EXPECT_TRUE(c.inline_data.empty());
}

// Every rank holds a table per shard (issue 31): a usual two-member sample
// (an 11-byte key, fields "bin" and "cls") must cost under 56 bytes, where a
// vector of SampleEntry cost ~280.
TEST(SampleTable, AUsualSampleCostsUnder56Bytes) {
  std::vector<SampleEntry> samples;
  uint64_t at = 0;
  for (int i = 0; i < 10000; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "%05d%06d", 3, i);
    const std::string k = key;
    samples.push_back({k, {{"bin", k + ".bin", at + 512, 16}, {"cls", k + ".cls", at + 1536, 3}}, at, at + 1539});
    at += 2048;
  }
  SampleTable table(samples);
  EXPECT_LT(table.MemoryBytes(), 56u * samples.size());
  ASSERT_EQ(table.size(), samples.size());
  for (size_t i : {size_t{0}, size_t{4321}, samples.size() - 1}) {
    const SampleView v = table[i];
    EXPECT_EQ(v.key, samples[i].key);
    EXPECT_EQ(v.begin, samples[i].begin);
    EXPECT_EQ(v.end, samples[i].end);
    ASSERT_EQ(v.members.size(), 2u);
    EXPECT_EQ(v.members[1].field, "cls");
    EXPECT_EQ(v.members[1].name(), samples[i].key + ".cls");
    EXPECT_EQ(v.members[1].offset, samples[i].members[1].offset);
    EXPECT_EQ(v.members[1].size, 3u);
    EXPECT_TRUE(v.members[1].inline_data.empty());
  }
}

// What the compact form cannot hold is kept whole, and reads back the same:
// a name not made of key and field, inline bytes, a Parquet row value,
// offsets and sizes past 2^48, more distinct fields than are interned.
TEST(SampleTable, IrregularMembersReadBackExactly) {
  std::vector<SampleEntry> samples;
  MemberRef label{"cls", "dogs/a.jpg (label)", 0, 0};
  label.inline_data = std::string("7");
  samples.push_back({"dogs/a", {{"image", "dogs/a.jpg", 0, 10}, {"jpg", "dogs/a.jpg", 0, 10}, label}, 0, 10});
  MemberRef row{"text", "row 3 (row group 0) column 'text'", 5, 4};
  row.row_value = true;
  samples.push_back({"3", {row}, 5, 9});
  const uint64_t big = uint64_t{1} << 33;
  samples.push_back({"sa_1", {{"jpg", "sa_1.jpg", big, big}, {"features.npz", "sa_1_features.npz", 2 * big + 7, 9}},
                     big - 512, 2 * big + 16});
  for (int i = 0; i < 300; ++i) {  // every sample a field of its own
    const std::string k = "k" + std::to_string(i), f = "f" + std::to_string(i) + ".bin";
    samples.push_back({k, {{f, k + "." + f, 512, 1}}, 0, 513});
  }
  SampleTable table(samples);
  ASSERT_EQ(table.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const SampleEntry back = table[i].ToEntry();
    const SampleEntry& want = samples[i];
    EXPECT_EQ(back.key, want.key);
    EXPECT_EQ(back.begin, want.begin);
    EXPECT_EQ(back.end, want.end);
    ASSERT_EQ(back.members.size(), want.members.size()) << want.key;
    for (size_t k = 0; k < want.members.size(); ++k) {
      const MemberRef &a = back.members[k], &b = want.members[k];
      EXPECT_EQ(a.field, b.field);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.offset, b.offset);
      EXPECT_EQ(a.size, b.size);
      EXPECT_EQ(a.inline_data.view(), b.inline_data.view());
      EXPECT_EQ(a.row_value, b.row_value);
    }
  }
  // Find reads the table as it reads an entry: exact first, then "JPEG" for "jpg".
  EXPECT_EQ(table[0].Find("cls")->inline_data, "7");
  EXPECT_FALSE(table[0].Find("png").has_value());
  std::vector<SampleEntry> upper = {{"x", {{"JPEG", "x.JPEG", 512, 3}}, 0, 515}};
  EXPECT_EQ(SampleTable(upper)[0].Find("jpg")->name(), "x.JPEG");
}

// ParseWrittenShardIndex reads WriteShardIndex's own output, checked against
// nlohmann's parse of the same text; any other form of the same document
// (spaces, an escaped or non-ASCII name) it leaves to ReadShardIndex's JSON
// parser, which reads the same samples; and a document out of bounds it
// refuses, leaving the error to that parser.
TEST(SampleIndexTest, WrittenSidecarsParseByHandAsNlohmannReadsThem) {
  std::vector<SampleEntry> entries = {
      {"a/0001", {{"jpg", "a/0001.jpg", 512, 100}, {"cls", "a/0001.cls", 1536, 1}}, 0, 1537},
      {"a/0002", {{"txt", "other-name.txt", 2560, 7}}, 2048, 2567},
      {"a/0003", {}, 3072, 3072},
  };
  ShardIndex index;
  index.shard_size = 4096;
  index.key_rule = KeyRule::kWebDataset;
  index.samples = SampleTable(entries);
  const std::string idx = TempPath("written.idx");
  ASSERT_TRUE(WriteShardIndex(index, idx).ok());
  const std::string text = testing::ReadFileBytes(idx);

  ShardIndex fast;
  ASSERT_TRUE(ParseWrittenShardIndex(text, &fast));
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(fast.shard_size, doc["shard_size"].get<uint64_t>());
  EXPECT_EQ(fast.key_rule, KeyRule::kWebDataset);
  ASSERT_EQ(fast.samples.size(), doc["samples"].size());
  for (size_t i = 0; i < fast.samples.size(); ++i) {
    const SampleView got = fast.samples[i];
    const nlohmann::json& want = doc["samples"][i];
    EXPECT_EQ(got.key, want[0].get<std::string>());
    EXPECT_EQ(got.begin, want[1].get<uint64_t>());
    EXPECT_EQ(got.end, want[2].get<uint64_t>());
    ASSERT_EQ(got.members.size(), want[3].size()) << "sample " << i;
    for (size_t m = 0; m < got.members.size(); ++m) {
      EXPECT_EQ(got.members[m].field, want[3][m][0].get<std::string>());
      EXPECT_EQ(got.members[m].name(), want[3][m][1].get<std::string>());
      EXPECT_EQ(got.members[m].offset, want[3][m][2].get<uint64_t>());
      EXPECT_EQ(got.members[m].size, want[3][m][3].get<uint64_t>());
    }
  }

  auto same_as_written = [&](const ShardIndex& r) {
    ASSERT_EQ(r.samples.size(), fast.samples.size());
    for (size_t i = 0; i < r.samples.size(); ++i) {
      EXPECT_EQ(r.samples[i].key, fast.samples[i].key);
      EXPECT_EQ(r.samples[i].end, fast.samples[i].end);
      ASSERT_EQ(r.samples[i].members.size(), fast.samples[i].members.size());
      for (size_t m = 0; m < r.samples[i].members.size(); ++m) {
        EXPECT_EQ(r.samples[i].members[m].name(), fast.samples[i].members[m].name());
        EXPECT_EQ(r.samples[i].members[m].offset, fast.samples[i].members[m].offset);
      }
    }
  };
  // Spaces and newlines (another writer): the JSON parser's, the same samples.
  const std::string spaced = doc.dump(1) + "\n";
  ShardIndex unused;
  EXPECT_FALSE(ParseWrittenShardIndex(spaced, &unused));
  {
    FILE* f = std::fopen(idx.c_str(), "wb");
    std::fwrite(spaced.data(), 1, spaced.size(), f);
    std::fclose(f);
  }
  auto back = ReadShardIndex(idx);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  same_as_written(*back);

  // An escaped quote and a non-ASCII name: the JSON parser's, read as written.
  entries[0].members[0].name = "a/\"0001\".jpg";
  entries[1].key = "a/\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87";
  entries[1].members[0].name = "other-\xc3\xa9.txt";
  index.samples = SampleTable(entries);
  ASSERT_TRUE(WriteShardIndex(index, idx).ok());
  EXPECT_FALSE(ParseWrittenShardIndex(testing::ReadFileBytes(idx), &unused));
  back = ReadShardIndex(idx);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->samples[0].members[0].name(), "a/\"0001\".jpg");
  EXPECT_EQ(back->samples[1].key, "a/\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87");
  EXPECT_EQ(back->samples[1].members[0].name(), "other-\xc3\xa9.txt");

  // A sample past the shard's end: refused here, named by the JSON parser's reader.
  std::string past = text;
  past.replace(past.find("\"shard_size\":4096"), 17, "\"shard_size\":3000");
  EXPECT_FALSE(ParseWrittenShardIndex(past, &unused));
  {
    FILE* f = std::fopen(idx.c_str(), "wb");
    std::fwrite(past.data(), 1, past.size(), f);
    std::fclose(f);
  }
  back = ReadShardIndex(idx);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("not a stoker index: sample #"), std::string::npos) << back.status().ToString();
}

}  // namespace
}  // namespace stoker
