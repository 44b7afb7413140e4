// pipeline/token_source.cc — see token_source.h.
#include "pipeline/token_source.h"

#include "io/reader.h"
#include "io/url.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file.h"

namespace stoker {

namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

constexpr char kCacheMagic[8] = {'S', 'T', 'K', 'G', 'P', 'T', '1', '\0'};

template <typename T>
void Put(std::vector<uint8_t>& out, const T* data, size_t n) {
  const uint64_t count = n;
  const auto* c = reinterpret_cast<const uint8_t*>(&count);
  out.insert(out.end(), c, c + 8);
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + n * sizeof(T));
}

template <typename T>
bool Get(const std::string& in, size_t& at, std::vector<T>& v) {
  uint64_t n;
  if (at + 8 > in.size()) return false;
  std::memcpy(&n, in.data() + at, 8);
  at += 8;
  if (n > (in.size() - at) / sizeof(T)) return false;
  v.resize(n);
  if (n) std::memcpy(v.data(), in.data() + at, n * sizeof(T));
  at += n * sizeof(T);
  return true;
}

std::vector<uint8_t> Serialize(const std::string& key, const GptIndices& g) {
  std::vector<uint8_t> out(kCacheMagic, kCacheMagic + 8);
  Put(out, key.data(), key.size());
  const int32_t meta[2] = {g.num_epochs, g.separate_final_epoch ? 1 : 0};
  Put(out, meta, 2);
  Put(out, g.document_index.data(), g.document_index.size());
  Put(out, g.sample_index.data(), g.sample_index.size());
  Put(out, g.shuffle_index.data(), g.shuffle_index.size());
  return out;
}

bool Deserialize(const std::string& in, const std::string& key, GptIndices* g) {
  if (in.size() < 8 || std::memcmp(in.data(), kCacheMagic, 8) != 0) return false;
  size_t at = 8;
  std::vector<char> stored;
  std::vector<int32_t> meta;
  if (!Get(in, at, stored) || std::string(stored.begin(), stored.end()) != key) return false;
  if (!Get(in, at, meta) || meta.size() != 2) return false;
  g->num_epochs = meta[0];
  g->separate_final_epoch = meta[1] != 0;
  return Get(in, at, g->document_index) && Get(in, at, g->sample_index) && Get(in, at, g->shuffle_index) &&
         at == in.size() && g->sample_index.size() >= 2 &&
         g->shuffle_index.size() == g->sample_index.size() / 2 - 1;
}

// The index of one dataset: from the cache when its description matches,
// else built here and written to the cache (best effort: a read-only
// directory only costs the rebuild next time).
Result<GptIndices> LoadOrBuild(const MegatronDataset& data, const TokenOptions& o, const GptIndexOptions& g,
                               int64_t begin, int64_t end, std::string* origin, const std::string& remote_cache_dir) {
  struct stat st {};
  const std::string idx_path = WithSuffix(data.prefix(), ".idx");
  const bool remote = IsRemoteUrl(data.prefix());
  std::error_code ec;
  // A remote prefix has no mtime: its version is its sizes (the .bin's is
  // pinned with its ETag by the reader), and its cache lives under the remote
  // cache directory, if any, never in a local path made from the URL.
  std::string version;
  if (remote) {
    version = "url=" + SplitQuery(data.prefix()).path + " sequences=" + std::to_string(data.num_sequences()) +
              " documents=" + std::to_string(data.document_indices().size()) +
              " bin_bytes=" + std::to_string(data.bin_bytes());
  } else {
    ::stat(idx_path.c_str(), &st);
    version = "path=" + std::filesystem::absolute(data.prefix(), ec).string() + " idx_bytes=" +
              std::to_string(st.st_size) + " idx_mtime=" + std::to_string(st.st_mtim.tv_sec) + "." +
              std::to_string(st.st_mtim.tv_nsec);
  }
  const std::string key = version + " seed=" + std::to_string(g.seed) + " seq_len=" + std::to_string(g.seq_len) +
                          " num_samples=" + std::to_string(g.num_samples) + " docs=" + std::to_string(begin) + ":" +
                          std::to_string(end) + " extra=" + std::to_string(g.add_extra_token) + " v=1";
  std::filesystem::path dir;
  if (!o.cache_dir.empty()) {
    dir = o.cache_dir;
  } else if (!remote) {
    dir = std::filesystem::absolute(data.prefix(), ec).parent_path() / "cache" / "stoker_indices";
  } else if (!remote_cache_dir.empty()) {
    dir = std::filesystem::path(remote_cache_dir) / "stoker_indices";
  } else {  // remote, no cache directory: built in memory each time
    STOKER_ASSIGN_OR_RETURN(GptIndices built, BuildGptIndices(data.sequence_lengths(), begin, end, g));
    *origin = "built";
    return built;
  }
  char name[64];
  std::snprintf(name, sizeof(name), "%016llx-gpt.idx.bin", static_cast<unsigned long long>(Fnv1a(key)));
  const std::string path = (dir / name).string();
  if (Result<std::string> cached = ReadWholeFile(path); cached.ok()) {
    GptIndices out;
    if (Deserialize(*cached, key, &out)) {
      *origin = "cached";
      return out;
    }
  }
  STOKER_ASSIGN_OR_RETURN(GptIndices built, BuildGptIndices(data.sequence_lengths(), begin, end, g));
  *origin = "built";
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  if (!ec && WriteWholeFile(tmp, Serialize(key, built)).ok()) std::filesystem::rename(tmp, path, ec);
  return built;
}

}  // namespace

Result<std::unique_ptr<TokenSource>> TokenSource::Open(const TokenOptions& o, uint64_t seed, const IoOptions& io) {
  if (o.paths.empty()) return InvalidArgument("no token dataset paths");
  if (!o.weights.empty() && o.weights.size() != o.paths.size()) {
    return InvalidArgument(std::to_string(o.weights.size()) + " weights for " + std::to_string(o.paths.size()) +
                           " paths");
  }
  if (o.weights.empty() && o.paths.size() != 1) return InvalidArgument("a blend of several paths needs weights");
  if (!o.weights.empty() && o.num_samples < 0) return InvalidArgument("a weighted blend needs num_samples");
  for (double w : o.weights)
    if (!(w > 0)) return InvalidArgument("blend weights must be positive");
  if (o.split_index < 0 || o.split_index > 2) return InvalidArgument("split_index must be 0, 1 or 2");
  if (seed > 0xffffffffULL) return InvalidArgument("megatron seeds numpy's RandomState: seed must fit 32 bits");
  const auto t0 = std::chrono::steady_clock::now();
  auto src = std::unique_ptr<TokenSource>(new TokenSource());
  src->sample_tokens_ = o.seq_len + (o.add_extra_token ? 1 : 0);
  src->extra_token_ = o.add_extra_token;
  GptIndexOptions g;
  g.seq_len = o.seq_len;
  g.seed = static_cast<uint32_t>(seed);
  g.add_extra_token = o.add_extra_token;
  g.drop_last_partial = true;
  BlendSizes blend;
  if (!o.weights.empty()) blend = PlanBlendSizes(o.weights, o.num_samples);
  for (size_t d = 0; d < o.paths.size(); ++d) {
    STOKER_ASSIGN_OR_RETURN(auto file, MegatronDataset::Open(o.paths[d], io));
    src->remote_ |= IsRemoteUrl(o.paths[d]) && io.cache_dir.empty();  // a cached object reads locally
    const int64_t elements = static_cast<int64_t>(file->num_sequences());
    STOKER_ASSIGN_OR_RETURN(auto range, SplitRange(o.split, o.split_index, elements));
    if (range.second <= range.first) {
      return InvalidArgument(o.paths[d] + ": split '" + o.split + "' leaves no documents for split " +
                             std::to_string(o.split_index));
    }
    g.num_samples = o.weights.empty() ? o.num_samples : blend.build[d];
    std::string origin;
    Result<GptIndices> indices = LoadOrBuild(*file, o, g, range.first, range.second, &origin, io.cache_dir);
    if (!indices.ok()) return indices.status().WithContext(o.paths[d]);
    if (indices->size() == 0) {
      // One epoch (num_samples unset) shorter than one window: megatron's
      // GPTDataset is empty, and a loader over it would end at once.
      int64_t tokens = 0;
      for (int64_t doc = range.first; doc < range.second; ++doc) tokens += file->sequence_lengths()[doc];
      return FailedPrecondition(
          o.paths[d] + ": no sample at seq_len " + std::to_string(o.seq_len) + ": split '" + o.split + "' (split " +
          std::to_string(o.split_index) + ") holds " + std::to_string(tokens) + " tokens in " +
          std::to_string(range.second - range.first) + " documents, fewer than one window of " +
          std::to_string(src->sample_tokens_) + " tokens (seq_len" + (o.add_extra_token ? " + 1" : "") +
          "). Pass a smaller seq_len, more documents, or num_samples (megatron then repeats the documents)");
    }
    src->origin_.push_back(origin);
    src->parts_.push_back(Part{file.get(), std::move(indices).value()});
    src->files_.push_back(std::move(file));
  }
  if (o.weights.empty()) {
    src->size_ = src->parts_[0].indices.size();
  } else {
    BuildBlendingIndices(blend.weights, blend.size, &src->dataset_index_, &src->dataset_sample_index_);
    // BlendedDataset's own check: no dataset is asked for more than it built.
    std::vector<int64_t> need(src->parts_.size(), 0);
    for (int64_t s = 0; s < blend.size; ++s) {
      int16_t d = src->dataset_index_[s];
      need[d] = std::max(need[d], src->dataset_sample_index_[s] + 1);
    }
    for (size_t d = 0; d < need.size(); ++d) {
      if (need[d] > src->parts_[d].indices.size()) {
        return FailedPrecondition(o.paths[d] + ": the blend needs " + std::to_string(need[d]) +
                                  " samples, the dataset built " + std::to_string(src->parts_[d].indices.size()));
      }
    }
    src->size_ = blend.size;
  }
  src->index_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return src;
}

Status TokenSource::Fill(int64_t i, int64_t* out) const {
  if (dataset_index_.empty()) return FillGpt(parts_[0], i, out);
  return FillGpt(parts_[dataset_index_[i]], dataset_sample_index_[i], out);
}

// GPTDataset._query_document_sample_shuffle_indices, writing in place.
Status TokenSource::FillGpt(const Part& part, int64_t idx, int64_t* out) const {
  const GptIndices& g = part.indices;
  const MegatronDataset& data = *part.data;
  const std::vector<int32_t>& lengths = data.sequence_lengths();
  const int64_t j = g.shuffle_index[idx];
  const int64_t d0 = g.sample_index[2 * j], o0 = g.sample_index[2 * j + 1];
  const int64_t d1 = g.sample_index[2 * j + 2], o1 = g.sample_index[2 * j + 3];
  int64_t written = 0;
  const int64_t want = sample_tokens_;
  auto take = [&](int64_t pos, int64_t offset, int64_t length) -> Status {
    const int32_t doc = g.document_index[pos];
    length = std::min<int64_t>(length, lengths[doc] - offset);
    length = std::min<int64_t>(length, want - written);
    if (length <= 0) return Status::Ok();
    STOKER_RETURN_IF_ERROR(data.CopyTokens(static_cast<size_t>(doc), offset, length, out + written));
    written += length;
    return Status::Ok();
  };
  const int64_t tail = extra_token_ ? 1 : 0;
  if (d0 == d1) {
    STOKER_RETURN_IF_ERROR(take(d0, o0, o1 - o0 + tail));
  } else {
    for (int64_t p = d0; p <= d1; ++p) {
      const int64_t offset = p > d0 ? 0 : o0;
      const int64_t length = p < d1 ? lengths[g.document_index[p]] - offset : o1 + tail;
      STOKER_RETURN_IF_ERROR(take(p, offset, length));
    }
  }
  // Megatron pads a short sample with its pad id, then maps pad ids to 0.
  for (; written < want; ++written) out[written] = 0;
  return Status::Ok();
}

}  // namespace stoker
