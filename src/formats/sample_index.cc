// formats/sample_index.cc — grouping tar members into samples, and the JSON
// sidecar index that lets a reader skip the header scan.
// Thread-safety: free functions keep no state.
#include "formats/sample_index.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <future>

#include <unordered_set>

#include "io/url.h"

namespace stoker {

namespace {

using nlohmann::json;

constexpr int kIndexVersion = 1;

std::string At(const std::string& shard, const TarMember& m) {
  return shard + ": member '" + m.name + "' at offset " + std::to_string(m.header_offset) + ": ";
}

// The sample being built: its key, and each member's own key so that fields
// can be renamed when a later member turns out to be the base
// ("sa_1_features.npz" then "sa_1.jpg").
struct OpenSample {
  SampleEntry entry;
  std::vector<std::string> raw_keys;
};

std::string FieldFor(const std::string& base, std::string_view raw_key, std::string_view field) {
  if (raw_key.size() == base.size()) return std::string(field);
  std::string f(raw_key.substr(base.size() + 1));
  f.push_back('.');
  f.append(field);
  return f;
}

bool IsSuffixKey(std::string_view longer, std::string_view base) {
  return longer.size() > base.size() + 1 && longer.starts_with(base) && longer[base.size()] == '_';
}

// Valid UTF-8 is all JSON strings can hold; a tar name may be any bytes.
bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// A compressed shard whose stream broke: the codec's fault, and the tar member
// it cuts (the scan of the decoded prefix stops there) or, when it falls
// between members, how far the tar got.
Status DamagedShard(const RandomAccessReader& file, const Status& damage) {
  Result<std::vector<TarMember>> prefix = ScanTar(file, file.Size());
  std::string where;
  if (!prefix.ok()) {
    where = "; the damage cuts the tar here: " + prefix.status().message();
  } else if (!prefix->empty()) {
    // Not "the damaged member": a checksum found at the end may blame any byte before it.
    const TarMember& m = prefix->back();
    where = "; the tar decoded before it holds " + std::to_string(prefix->size()) + " members, the last '" + m.name +
            "' at offset " + std::to_string(m.header_offset);
  }
  return DataLoss(damage.message() + where);
}

}  // namespace

Result<KeyRule> ParseKeyRule(std::string_view name) {
  if (name == "webdataset") return KeyRule::kWebDataset;
  if (name == "underscore") return KeyRule::kUnderscoreSuffix;
  return InvalidArgument("unknown key rule '" + std::string(name) + "' (expected webdataset or underscore)");
}

const char* KeyRuleName(KeyRule rule) {
  return rule == KeyRule::kUnderscoreSuffix ? "underscore" : "webdataset";
}

namespace {

// A field name as the WebDataset rule compares it: lowercased, a final
// extension "jpeg" spelled "jpg".
std::string MatchForm(std::string_view field) {
  std::string s(field);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "jpeg" || s.ends_with(".jpeg")) s.erase(s.size() - 2, 1);  // "jpeg" -> "jpg"
  return s;
}

}  // namespace

const MemberRef* SampleEntry::FindExact(std::string_view field) const {
  for (const MemberRef& m : members) {
    if (m.field == field) return &m;
  }
  return nullptr;
}

std::string_view AliasedField(const FieldAliases* aliases, std::string_view field) {
  if (aliases) {
    for (const auto& [asked, member] : *aliases) {
      if (asked == field) return member;
    }
  }
  return field;
}

const MemberRef* SampleEntry::Find(std::string_view field) const {
  field = AliasedField(aliases.get(), field);
  if (const MemberRef* m = FindExact(field)) return m;
  const std::string want = MatchForm(field);
  for (const MemberRef& m : members) {
    if (MatchForm(m.field) == want) return &m;
  }
  return nullptr;
}

std::optional<MemberView> SampleView::FindExact(std::string_view field) const {
  for (MemberView m : members) {
    if (m.field == field) return m;
  }
  return std::nullopt;
}

std::optional<MemberView> SampleView::Find(std::string_view field) const {
  field = members.MemberFieldFor(field);
  if (std::optional<MemberView> m = FindExact(field)) return m;
  const std::string want = MatchForm(field);
  for (MemberView m : members) {
    if (MatchForm(m.field) == want) return m;
  }
  return std::nullopt;
}

SampleEntry SampleView::ToEntry() const {
  SampleEntry e{std::string(key), {}, begin, end, packed};
  e.aliases = members.shared_aliases();
  e.members.reserve(members.size());
  for (MemberView m : members) {
    MemberRef r{std::string(m.field), m.name(), m.offset, m.size};
    r.inline_data = m.inline_data;
    r.row_value = m.row_value;
    e.members.push_back(std::move(r));
  }
  return e;
}

std::span<const uint8_t> MemberView::data(std::span<const uint8_t> sample_bytes) const {
  if (!inline_data.empty()) return {reinterpret_cast<const uint8_t*>(inline_data.data()), inline_data.size()};
  return sample_bytes.subspan(at, size);
}

std::string MemberView::name() const {
  std::string n(name_base);
  if (name_join != 0) {
    n.push_back(name_join);
    n.append(field);
  }
  return n;
}

size_t MemberList::size() const { return entry_ ? entry_->members.size() : count_; }

std::string_view MemberList::MemberFieldFor(std::string_view field) const {
  const FieldAliases* aliases = table_ ? table_->aliases().get() : entry_ ? entry_->aliases.get() : nullptr;
  return AliasedField(aliases, field);
}

std::shared_ptr<const FieldAliases> MemberList::shared_aliases() const {
  if (table_) return table_->aliases();
  return entry_ ? entry_->aliases : nullptr;
}

MemberView MemberList::operator[](size_t i) const {
  if (table_) return table_->MemberAt(first_ + static_cast<uint32_t>(i), key_, begin_);
  const MemberRef& m = entry_->members[i];
  MemberView v;
  v.field = m.field;
  v.offset = m.offset;
  v.size = m.size;
  v.at = m.offset - entry_->begin;
  if (entry_->packed) {
    v.at = 0;
    for (size_t j = 0; j < i; ++j) v.at += entry_->members[j].inline_data.empty() ? entry_->members[j].size : 0;
  }
  v.inline_data = m.inline_data.view();
  v.row_value = m.row_value;
  v.name_base = m.name;
  return v;
}

namespace {

constexpr uint64_t kMax32 = UINT32_MAX;
// A member's flags.
constexpr uint16_t kIrregular = 1;
constexpr uint16_t kJoinDot = 2;
constexpr uint16_t kJoinUnderscore = 4;

}  // namespace

SampleTable::SampleTable(const std::vector<SampleEntry>& samples) {
  size_t members = 0;
  for (const SampleEntry& s : samples) members += s.members.size();
  reserve(samples.size(), members);
  for (const SampleEntry& s : samples) push_back(s);
  shrink_to_fit();
}

void SampleTable::reserve(size_t samples, size_t members) {
  samples_.reserve(samples);
  members_.reserve(members);
}

SampleTable::Span SampleTable::Text(std::string_view s) {
  Span span{static_cast<uint32_t>(text_.size()), static_cast<uint32_t>(s.size())};
  text_.append(s);
  return span;
}

void SampleTable::push_back(const SampleEntry& sample) {
  const size_t n = samples_.size();
  if (n == 0) {
    key_len_ = sample.key.size();
    members_per_ = sample.members.size();
  }
  // A key of another length, or another member count: from here on, where
  // each starts is kept rather than computed.
  if (key_at_.empty() && sample.key.size() != key_len_) {
    key_at_.reserve(samples_.capacity());
    for (size_t i = 0; i < n; ++i) key_at_.push_back(static_cast<uint32_t>(i * key_len_));
  }
  if (!key_at_.empty()) key_at_.push_back(static_cast<uint32_t>(keys_.size()));
  if (first_member_.empty() && sample.members.size() != members_per_) {
    first_member_.reserve(samples_.capacity());
    for (size_t i = 0; i < n; ++i) first_member_.push_back(static_cast<uint32_t>(i * members_per_));
  }
  if (!first_member_.empty()) first_member_.push_back(static_cast<uint32_t>(members_.size()));
  samples_.push_back({sample.begin, sample.end});
  keys_.append(sample.key);
  const std::string_view key = sample.key;
  for (const MemberRef& m : sample.members) {
    const std::string_view name = m.name, field = m.field;
    // The name is key, '.' or '_', field: the usual tar member.
    const bool composed = name.size() == key.size() + 1 + field.size() && name.starts_with(key) &&
                          name.ends_with(field) && (name[key.size()] == '.' || name[key.size()] == '_');
    bool regular = composed && m.inline_data.empty() && !m.row_value && m.offset >= sample.begin &&
                   m.offset - sample.begin <= kMax32 && m.size <= kMax32;
    size_t id = 0;
    if (regular) {
      while (id < fields_.size() && TextAt(fields_[id].at, fields_[id].len) != field) ++id;
      if (id == fields_.size()) {
        if (fields_.size() < kInternedFields) {
          fields_.push_back(Text(field));
        } else {
          regular = false;
        }
      }
    }
    if (regular) {
      const uint16_t join = name[key.size()] == '.' ? kJoinDot : kJoinUnderscore;
      members_.push_back({static_cast<uint32_t>(m.offset - sample.begin), static_cast<uint32_t>(m.size),
                          static_cast<uint16_t>(id), join});
      continue;
    }
    Irregular ir{};
    ir.member = static_cast<uint32_t>(members_.size());
    Span f = Text(field), nm = Text(name), in = Text(m.inline_data.view());
    ir.field_at = f.at, ir.field_len = f.len;
    ir.name_at = nm.at, ir.name_len = nm.len;
    ir.inline_at = in.at, ir.inline_len = in.len;
    ir.row_value = m.row_value;
    ir.offset = m.offset;
    ir.size = m.size;
    irregular_.push_back(ir);
    members_.push_back({0, 0, 0, kIrregular});
  }
}

void SampleTable::shrink_to_fit() {
  keys_.shrink_to_fit();
  text_.shrink_to_fit();
  samples_.shrink_to_fit();
  members_.shrink_to_fit();
  fields_.shrink_to_fit();
  irregular_.shrink_to_fit();
  key_at_.shrink_to_fit();
  first_member_.shrink_to_fit();
}

size_t SampleTable::MemoryBytes() const {
  return keys_.capacity() + text_.capacity() + samples_.capacity() * sizeof(Sample) +
         members_.capacity() * sizeof(Member) + fields_.capacity() * sizeof(Span) +
         irregular_.capacity() * sizeof(Irregular) + (key_at_.capacity() + first_member_.capacity()) * sizeof(uint32_t);
}

SampleView SampleTable::operator[](size_t i) const {
  const Sample& s = samples_[i];
  const bool last = i + 1 == samples_.size();
  const uint32_t key_at = KeyAt(i);
  const uint32_t key_end = last ? static_cast<uint32_t>(keys_.size()) : KeyAt(i + 1);
  const uint32_t first = FirstMember(i);
  const uint32_t members_end = last ? static_cast<uint32_t>(members_.size()) : FirstMember(i + 1);
  const std::string_view key = std::string_view(keys_).substr(key_at, key_end - key_at);
  return {key, s.begin, s.end, MemberList(this, key, s.begin, first, members_end - first)};
}

MemberView SampleTable::MemberAt(uint32_t i, std::string_view key, uint64_t begin) const {
  const Member& m = members_[i];
  MemberView v;
  if (m.flags & kIrregular) {
    auto it = std::lower_bound(irregular_.begin(), irregular_.end(), i,
                               [](const Irregular& ir, uint32_t member) { return ir.member < member; });
    v.field = TextAt(it->field_at, it->field_len);
    v.name_base = TextAt(it->name_at, it->name_len);
    v.inline_data = TextAt(it->inline_at, it->inline_len);
    v.row_value = it->row_value;
    v.offset = it->offset;
    v.size = it->size;
    v.at = it->offset - begin;
    return v;
  }
  const Span& field = fields_[m.field];
  v.field = TextAt(field.at, field.len);
  v.offset = begin + m.offset;
  v.at = m.offset;
  v.size = m.size;
  v.name_base = key;
  v.name_join = (m.flags & kJoinDot) ? '.' : '_';
  return v;
}

bool SplitKey(std::string_view name, std::string_view* key, std::string_view* field) {
  size_t slash = name.rfind('/');
  size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  if (dot == std::string_view::npos || dot == base) return false;
  *key = name.substr(0, dot);
  *field = name.substr(dot + 1);
  return true;
}

Result<std::vector<SampleEntry>> GroupSamples(const std::vector<TarMember>& members, KeyRule rule,
                                              const std::string& shard_path) {
  std::vector<SampleEntry> samples;
  std::unordered_set<std::string> closed_keys;  // every raw key of every finished sample
  // Under the underscore rule, also every "_"-prefix of those keys: a member
  // "sa_1.jpg" after "sa_1_features.npz" has gone by belongs to a finished sample.
  std::unordered_set<std::string> closed_prefixes;
  std::optional<OpenSample> open;
  const bool underscore = rule == KeyRule::kUnderscoreSuffix;
  closed_keys.reserve(members.size());

  auto close = [&] {
    if (!open) return;
    for (std::string& k : open->raw_keys) {
      for (size_t p = underscore ? k.find('_') : std::string::npos; p != std::string::npos; p = k.find('_', p + 1)) {
        closed_prefixes.insert(k.substr(0, p));
      }
      closed_keys.insert(std::move(k));
    }
    samples.push_back(std::move(open->entry));
    open.reset();
  };

  for (const TarMember& m : members) {
    std::string_view key, field;
    if (!SplitKey(m.name, &key, &field)) continue;
    const std::string k(key);
    bool seen = closed_keys.contains(k);
    if (underscore && !seen) {
      seen = closed_prefixes.contains(k);
      for (size_t p = k.find('_'); !seen && p != std::string::npos; p = k.find('_', p + 1)) {
        seen = closed_keys.contains(k.substr(0, p));
      }
    }
    if (seen) {
      return DataLoss(At(shard_path, m) + "key '" + k + "' belongs to a sample seen before other samples" +
                      " (members of a sample must be adjacent)");
    }
    bool joins = false;
    if (open) {
      const std::string& base = open->entry.key;
      if (key == base) {
        joins = true;
      } else if (underscore && IsSuffixKey(key, base)) {
        joins = true;
      } else if (underscore && IsSuffixKey(base, key)) {
        // The suffixed member came first: this one is the base; rename the rest.
        open->entry.key = k;
        for (size_t i = 0; i < open->entry.members.size(); ++i) {
          MemberRef& r = open->entry.members[i];
          std::string_view own_field = std::string_view(r.name).substr(open->raw_keys[i].size() + 1);
          r.field = FieldFor(open->entry.key, open->raw_keys[i], own_field);
        }
        joins = true;
      }
    }
    if (!joins) {
      close();
      open.emplace();
      open->entry.key = k;
      open->entry.begin = m.header_offset;
    }
    std::string f = FieldFor(open->entry.key, key, field);
    if (open->entry.FindExact(f)) {
      return DataLoss(At(shard_path, m) + "field '" + f + "' appears twice in sample '" + open->entry.key + "'");
    }
    open->entry.members.push_back({std::move(f), m.name, m.data_offset, m.size});
    open->raw_keys.emplace_back(key);
    open->entry.end = m.data_offset + m.size;
  }
  close();
  // The vector grew by doubling: up to half of it is spare entries (72 bytes
  // each), kept for the loader's lifetime unless given back here.
  samples.shrink_to_fit();
  return samples;
}

std::string IndexPathFor(const std::string& shard_path) { return WithSuffix(shard_path, ".idx"); }

Status WriteShardIndex(const ShardIndex& index, const std::string& index_path) {
  json samples = json::array();
  for (SampleView s : index.samples) {
    json members = json::array();
    for (MemberView m : s.members) {
      const std::string name = m.name();
      if (!IsUtf8(name)) {
        return InvalidArgument(index_path + ": member '" + name + "' of " + index.shard_path +
                               " is not UTF-8 and cannot be stored in a JSON index");
      }
      members.push_back({std::string(m.field), name, m.offset, m.size});
    }
    samples.push_back({std::string(s.key), s.begin, s.end, std::move(members)});
  }
  json doc = {{"format", "stoker-index"},
              {"version", kIndexVersion},
              {"shard_size", index.shard_size},
              {"key_rule", KeyRuleName(index.key_rule)},
              {"samples", std::move(samples)}};
  std::string text = doc.dump();
  text.push_back('\n');
  return WriteWholeFile(index_path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

namespace {

// The sidecar read in one pass through nlohmann's SAX interface: each sample
// goes straight into the table as its last member closes, with no JSON value
// built for it (a DOM of a 10,000-sample sidecar is ~10^5 allocations, most
// of the time a loader spent opening 20 shards with sidecars). The document:
//   {"format": "stoker-index", "version": 1, "shard_size": N, "key_rule": R,
//    "samples": [[key, begin, end, [[field, name, offset, size], ...]], ...]}
// in any key order (the writer's is alphabetical: samples before shard_size
// and version), other keys ignored; so the bound end <= shard_size is checked
// at the end, and a sample that stops the parse leaves the header unread:
// header_only reads it again, skipping the samples.
class SidecarReader : public nlohmann::json_sax<json> {
 public:
  SidecarReader(ShardIndex* index, bool header_only = false) : index_(index), header_only_(header_only) {}

  // The document's header fields, as read (empty or false where absent or of another type).
  struct Header {
    std::string format, key_rule;
    uint64_t version = 0;
    bool has_version = false, has_shard_size = false;
  };
  const Header& header() const { return header_; }
  // Where the parse stopped and why ("" after a whole, well-formed document).
  const std::string& error() const { return error_; }
  // After the parse: whether every sample was well formed and inside the shard.
  bool Finish() {
    if (!error_.empty()) return false;
    if (!has_samples_) return Fail("samples");
    if (header_.has_shard_size && max_end_ > index_->shard_size) {
      return Fail("sample #" + std::to_string(first_past_end_));
    }
    return true;
  }

  bool null() override { return Scalar(); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool binary(binary_t&) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t v) override {
    if (skip_ > 0 || depth_ == 1) {
      if (skip_ == 0 && key_ == "version") {
        header_.version = v;
        header_.has_version = true;
      } else if (skip_ == 0 && key_ == "shard_size") {
        index_->shard_size = v;
        header_.has_shard_size = true;
      }
      return Scalar();
    }
    if (depth_ == 3 && (at_ == 1 || at_ == 2)) {
      (at_ == 1 ? sample_.begin : sample_.end) = v;
      ++at_;
      return true;
    }
    if (depth_ == 5 && (at_ == 2 || at_ == 3)) {
      (at_ == 2 ? member_.offset : member_.size) = v;
      ++at_;
      return true;
    }
    return BadHere();
  }
  bool string(string_t& v) override {
    if (skip_ > 0 || depth_ == 1) {
      if (skip_ == 0 && key_ == "format") header_.format = v;
      if (skip_ == 0 && key_ == "key_rule") header_.key_rule = v;
      return Scalar();
    }
    if (depth_ == 3 && at_ == 0) {
      sample_.key = std::move(v);
      ++at_;
      return true;
    }
    if (depth_ == 5 && (at_ == 0 || at_ == 1)) {
      (at_ == 0 ? member_.field : member_.name) = std::move(v);
      ++at_;
      return true;
    }
    return BadHere();
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (skip_ > 0 || depth_ == 1) {
      ++skip_;
      return true;
    }
    return BadHere();
  }
  bool key(string_t& k) override {
    if (skip_ == 0) key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    depth_ = 0;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return Fail("invalid JSON");  // the document is an object
    if (skip_ > 0 || (depth_ == 1 && (key_ != "samples" || header_only_))) {
      ++skip_;
      return true;
    }
    if (depth_ == 1) {
      has_samples_ = true;
      depth_ = 2;
      return true;
    }
    if (depth_ == 2) {  // a sample
      sample_.members.clear();
      at_ = 0;
      depth_ = 3;
      return true;
    }
    if (depth_ == 3 && at_ == 3) {  // its members
      depth_ = 4;
      return true;
    }
    if (depth_ == 4) {  // a member
      at_ = 0;
      depth_ = 5;
      return true;
    }
    return BadHere();
  }
  bool end_array() override {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    switch (depth_) {
      case 2:
        depth_ = 1;
        return true;
      case 3: {
        if (at_ != 4 || sample_.begin > sample_.end) return BadHere();
        if (sample_.end > max_end_) {
          max_end_ = sample_.end;
          first_past_end_ = index_->samples.size();
        }
        index_->samples.push_back(sample_);
        depth_ = 2;
        return true;
      }
      case 4:
        at_ = 4;
        depth_ = 3;
        return true;
      case 5: {
        if (at_ != 4 || member_.offset < sample_.begin || member_.offset > sample_.end ||
            member_.size > sample_.end - member_.offset) {
          return Fail("a member of sample '" + sample_.key + "'");
        }
        sample_.members.push_back(std::move(member_));
        member_ = MemberRef{};
        at_ = 0;  // the next member starts afresh
        depth_ = 4;
        return true;
      }
      default:
        return BadHere();
    }
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    if (error_.empty()) error_ = "invalid JSON";
    return false;
  }

 private:
  // A scalar value: skipped, a top-level one (read above), or out of place.
  bool Scalar() {
    if (skip_ > 0 || depth_ == 1) return true;
    return BadHere();
  }
  bool BadHere() {
    if (depth_ >= 5) return Fail("a member of sample '" + sample_.key + "'");
    if (depth_ >= 2) return Fail("sample #" + std::to_string(index_->samples.size()));
    return Fail("samples");
  }
  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  ShardIndex* index_;
  const bool header_only_;
  int depth_ = 0;     // 1: the document, 2: samples, 3: a sample, 4: its members, 5: a member
  int skip_ = 0;      // nesting inside a value of a key this reader does not know
  int at_ = 0;        // the next position in the sample (depth 3) or member (depth 5)
  std::string key_;   // the document's current key
  Header header_;
  bool has_samples_ = false;
  SampleEntry sample_;  // reused: the table copies it
  MemberRef member_;
  uint64_t max_end_ = 0;
  size_t first_past_end_ = 0;
  std::string error_;
};

// ParseWrittenShardIndex's reader: a cursor over the text that fails at the
// first byte out of the writer's form.
class WrittenSidecar {
 public:
  explicit WrittenSidecar(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  bool Parse(ShardIndex* index, std::string* key_rule) {
    std::string format;
    if (!Lit("{\"format\":") || !Str(&format) || format != "stoker-index") return false;
    if (!Lit(",\"key_rule\":") || !Str(key_rule) || !Lit(",\"samples\":[")) return false;
    SampleEntry e;
    MemberRef m;
    uint64_t max_end = 0;
    if (!Lit("]")) {
      do {
        if (!Lit("[") || !Str(&e.key) || !Lit(",") || !Num(&e.begin) || !Lit(",") || !Num(&e.end) ||
            e.begin > e.end || !Lit(",[")) {
          return false;
        }
        e.members.clear();
        if (!Lit("]")) {
          do {
            if (!Lit("[") || !Str(&m.field) || !Lit(",") || !Str(&m.name) || !Lit(",") || !Num(&m.offset) ||
                !Lit(",") || !Num(&m.size) || !Lit("]")) {
              return false;
            }
            if (m.offset < e.begin || m.offset > e.end || m.size > e.end - m.offset) return false;
            e.members.push_back(m);
          } while (Lit(","));
          if (!Lit("]")) return false;
        }
        if (!Lit("]")) return false;
        max_end = std::max(max_end, e.end);
        index->samples.push_back(e);
      } while (Lit(","));
      if (!Lit("]")) return false;
    }
    uint64_t version = 0;
    if (!Lit(",\"shard_size\":") || !Num(&index->shard_size) || !Lit(",\"version\":") || !Num(&version) ||
        version != static_cast<uint64_t>(kIndexVersion) || !Lit("}")) {
      return false;
    }
    Lit("\n");
    return p_ == end_ && max_end <= index->shard_size;
  }

 private:
  bool Lit(std::string_view s) {
    if (static_cast<size_t>(end_ - p_) < s.size() || std::memcmp(p_, s.data(), s.size()) != 0) return false;
    p_ += s.size();
    return true;
  }
  bool Str(std::string* out) {
    if (p_ == end_ || *p_ != '"') return false;
    const char* begin = ++p_;
    for (; p_ != end_ && *p_ != '"'; ++p_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
    }
    if (p_ == end_) return false;
    out->assign(begin, p_++);
    return true;
  }
  bool Num(uint64_t* v) {
    const char* begin = p_;
    uint64_t x = 0;
    for (; p_ != end_ && *p_ >= '0' && *p_ <= '9'; ++p_) {
      const uint64_t digit = static_cast<uint64_t>(*p_ - '0');
      if (x > (UINT64_MAX - digit) / 10) return false;
      x = x * 10 + digit;
    }
    if (p_ == begin || (*begin == '0' && p_ - begin > 1)) return false;
    *v = x;
    return true;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

bool ParseWrittenShardIndex(std::string_view text, ShardIndex* index) {
  std::string key_rule;
  if (!WrittenSidecar(text).Parse(index, &key_rule)) return false;
  Result<KeyRule> rule = ParseKeyRule(key_rule);
  if (!rule.ok()) return false;
  index->key_rule = *rule;
  return true;
}

Result<ShardIndex> ReadShardIndex(const std::string& index_path, const IoOptions& io) {
  STOKER_ASSIGN_OR_RETURN(std::string text, ReadWholeObject(index_path, io));  // a path or a URL
  auto bad = [&](const std::string& why) { return DataLoss(index_path + ": not a stoker index: " + why); };
  auto named = [&](ShardIndex index) {
    index.samples.shrink_to_fit();
    if (UrlParts p = SplitQuery(index_path); p.path.ends_with(".idx")) {
      index.shard_path = p.path.substr(0, p.path.size() - 4) + p.suffix;
    }
    return index;
  };
  if (ShardIndex written; ParseWrittenShardIndex(text, &written)) return named(std::move(written));
  ShardIndex index;
  SidecarReader reader(&index);
  const bool parsed = json::sax_parse(text, &reader);
  const bool whole = reader.Finish();
  if (!parsed && reader.error() == "invalid JSON") return bad("invalid JSON");
  // The header's fields first, as a reader of the whole document judges them
  // (a later version's samples may not parse as this version's).
  SidecarReader::Header h = reader.header();
  if (!parsed) {
    ShardIndex unused;
    SidecarReader header(&unused, /*header_only=*/true);
    json::sax_parse(text, &header);
    h = header.header();
  }
  if (h.format != "stoker-index") return bad("format");
  if (!h.has_version) return bad("version");
  if (h.version != kIndexVersion) {
    return FailedPrecondition(index_path + ": index version " + std::to_string(h.version) + ", this build reads " +
                              std::to_string(kIndexVersion));
  }
  if (!h.has_shard_size) return bad("shard_size");
  if (h.key_rule.empty()) return bad("key_rule");
  Result<KeyRule> rule = ParseKeyRule(h.key_rule);
  if (!rule.ok()) return bad(rule.status().message());
  index.key_rule = *rule;
  if (!parsed || !whole) return bad(reader.error().empty() ? std::string("invalid JSON") : reader.error());
  return named(std::move(index));
}

Result<ShardIndex> LoadOrBuildShardIndex(const std::string& shard_path, KeyRule rule, const IoOptions& io,
                                         uint64_t known_size) {
  const std::string index_path = IndexPathFor(shard_path);
  if (known_size > 0 && IsRemoteUrl(shard_path)) {
    Result<ShardIndex> sidecar = ReadShardIndex(index_path, io);
    if (sidecar.ok() && sidecar->shard_size == known_size && sidecar->key_rule == rule) {
      sidecar->shard_path = shard_path;
      return std::move(sidecar).value();
    }
    // Missing, stale or corrupt: the full path below says which.
  }
  // A remote shard's open (a HEAD) and its sidecar's GET are a round trip
  // each: they go out together, so a loader's start waits for one, not two.
  std::future<Result<ShardIndex>> remote_sidecar;
  if (IsRemoteUrl(shard_path)) {
    remote_sidecar = std::async(std::launch::async, [index_path, io] { return ReadShardIndex(index_path, io); });
  }
  // (An early return waits for it: a std::async future joins as it is destroyed.)
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> file, OpenReader(shard_path, io));
  const uint64_t size = file->Size();
  if (Status damage = file->Damage(); !damage.ok()) return DamagedShard(*file, damage);
  Result<ShardIndex> sidecar = remote_sidecar.valid() ? remote_sidecar.get() : ReadShardIndex(index_path, io);
  if (sidecar.ok()) {
    // A sidecar for another version of the shard, or another key rule, is
    // stale rather than corrupt: fall back to the scan.
    if (sidecar->shard_size == size && sidecar->key_rule == rule) {
      sidecar->shard_path = shard_path;
      return std::move(sidecar).value();
    }
  } else if (sidecar.status().code() != StatusCode::kNotFound &&
             sidecar.status().code() != StatusCode::kFailedPrecondition) {
    return sidecar.status();  // a corrupt index is reported, not silently bypassed
  }
  // gzip and zstd are decompressed by the reader itself (io/reader.h); a
  // remote one whose name does not say so is not sniffed: say so instead of
  // "bad tar header". Checked only before a scan: a valid sidecar already
  // says it is a tar, and the check costs a remote shard a round trip.
  uint8_t magic[4] = {};
  if (!file->Compression() && size >= 4 && file->ReadAt(0, magic).ok()) {
    const bool gz = magic[0] == 0x1f && magic[1] == 0x8b;
    const bool zst = magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd;
    if (gz || zst) {
      return FailedPrecondition(shard_path + " is " + (gz ? "gzip" : "zstd") +
                                "-compressed but its name does not say so: a remote shard is read compressed when " +
                                "named *.gz, *.tgz or *.zst; rename it, decompress it, or repack with `stoker pack`");
    }
  }
  ShardIndex index;
  index.shard_path = shard_path;
  index.shard_size = size;
  index.key_rule = rule;
  STOKER_ASSIGN_OR_RETURN(std::vector<TarMember> members, ScanTar(*file, size));
  STOKER_ASSIGN_OR_RETURN(std::vector<SampleEntry> samples, GroupSamples(members, rule, shard_path));
  index.samples = SampleTable(samples);
  index.scanned = true;
  return index;
}

}  // namespace stoker
