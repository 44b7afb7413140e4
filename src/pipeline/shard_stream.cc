// pipeline/shard_stream.cc — see shard_stream.h.
#include "pipeline/shard_stream.h"

#include <cstring>
#include <utility>

namespace stoker {
namespace {

// The entry's encoding after the data: fixed-width numbers in host order (it
// never leaves the process), strings as a 32-bit length and their bytes.
constexpr uint32_t kNameIsKeyDotField = 0xFFFFFFFFu;

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>* out, std::string_view s) {
  Put(out, static_cast<uint32_t>(s.size()));
  out->insert(out->end(), s.begin(), s.end());
}

bool IsKeyDotField(std::string_view name, std::string_view key, std::string_view field) {
  return name.size() == key.size() + 1 + field.size() && name.starts_with(key) && name[key.size()] == '.' &&
         name.ends_with(field);
}

class Cursor {
 public:
  explicit Cursor(const uint8_t* p) : p_(p) {}
  template <typename T>
  T Get() {
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string String(uint32_t size) {
    std::string s(reinterpret_cast<const char*>(p_), size);
    p_ += size;
    return s;
  }

 private:
  const uint8_t* p_;
};

}  // namespace

StreamSample::StreamSample(uint32_t shard, const SampleEntry& entry, std::vector<uint8_t> data)
    : bytes_(std::move(data)), data_size_(bytes_.size()), shard_(shard) {
  size_t need = data_size_ + 4 + entry.key.size() + 8 + 8 + 4;
  for (const MemberRef& m : entry.members) {
    need += 4 + m.field.size() + 4 + (IsKeyDotField(m.name, entry.key, m.field) ? 0 : m.name.size()) + 8 + 8;
  }
  // One allocation of exactly its size: it waits in the shuffle buffer, and
  // the growth left by appending members (a small member after a large one
  // doubles the vector) would be held too, up to twice the sample's bytes.
  if (bytes_.capacity() > need) {
    std::vector<uint8_t> exact;
    exact.reserve(need);
    exact.assign(bytes_.begin(), bytes_.end());
    bytes_.swap(exact);
  } else {
    bytes_.reserve(need);
  }
  PutString(&bytes_, entry.key);
  Put(&bytes_, entry.begin);
  Put(&bytes_, entry.end);
  Put(&bytes_, static_cast<uint32_t>(entry.members.size()));
  for (const MemberRef& m : entry.members) {
    PutString(&bytes_, m.field);
    if (IsKeyDotField(m.name, entry.key, m.field)) {
      Put(&bytes_, kNameIsKeyDotField);
    } else {
      PutString(&bytes_, m.name);
    }
    Put(&bytes_, m.offset);
    Put(&bytes_, m.size);
  }
}

SampleEntry StreamSample::Entry() const {
  Cursor c(bytes_.data() + data_size_);
  SampleEntry e;
  e.key = c.String(c.Get<uint32_t>());
  e.begin = c.Get<uint64_t>();
  e.end = c.Get<uint64_t>();
  e.packed = true;
  e.members.resize(c.Get<uint32_t>());
  for (MemberRef& m : e.members) {
    m.field = c.String(c.Get<uint32_t>());
    const uint32_t name = c.Get<uint32_t>();
    m.name = name == kNameIsKeyDotField ? e.key + "." + m.field : c.String(name);
    m.offset = c.Get<uint64_t>();
    m.size = c.Get<uint64_t>();
  }
  return e;
}

Result<std::unique_ptr<ShardStream>> ShardStream::Open(const std::string& path, uint32_t shard,
                                                      const IoOptions& io, bool first) {
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessReader> reader, OpenReader(path, io));
  return std::unique_ptr<ShardStream>(new ShardStream(std::move(reader), shard, first));
}

ShardStream::ShardStream(std::unique_ptr<RandomAccessReader> reader, uint32_t shard, bool first)
    : reader_(std::move(reader)), tar_(*reader_, reader_->Size(), first), shard_(shard) {}

Status ShardStream::Add(const TarMember& m, std::string_view field) {
  Building& s = open_;
  if (s.entry.FindExact(field)) {
    return DataLoss(reader_->Name() + ": member '" + m.name + "' at offset " + std::to_string(m.header_offset) +
                    ": field '" + std::string(field) + "' twice in sample '" + s.entry.key + "'");
  }
  const uint64_t end = m.data_offset + m.size;
  // The data only (the sample is packed): not the headers and padding before it.
  STOKER_RETURN_IF_ERROR(tar_.Append(m.data_offset, end, &s.data));
  s.entry.members.push_back(MemberRef{std::string(field), m.name, m.data_offset, m.size});
  s.entry.end = end;
  return Status::Ok();
}

Result<std::optional<StreamSample>> ShardStream::Next() {
  while (!done_) {
    std::optional<TarMember> m = std::move(ahead_);
    ahead_.reset();
    if (!m) {
      STOKER_ASSIGN_OR_RETURN(m, tar_.Next());
      if (!m) {
        done_ = true;
        break;
      }
    }
    std::string_view key, field;
    if (!SplitKey(m->name, &key, &field)) continue;  // README, .DS_Store: in no sample, as in webdataset
    if (open_.held && key == open_.entry.key) {
      STOKER_RETURN_IF_ERROR(Add(*m, field));
      continue;
    }
    if (open_.held) {  // a new key: the open sample is complete
      ahead_ = std::move(m);
      return Complete();
    }
    open_.held = true;
    open_.entry.key = key;
    open_.entry.begin = m->header_offset;
    open_.entry.end = m->header_offset;
    open_.entry.packed = true;
    open_.entry.members.clear();
    STOKER_RETURN_IF_ERROR(Add(*m, field));
  }
  return Complete();
}

std::optional<StreamSample> ShardStream::Complete() {
  if (!open_.held) return std::nullopt;
  open_.held = false;
  return StreamSample(shard_, open_.entry, std::exchange(open_.data, {}));
}

}  // namespace stoker
