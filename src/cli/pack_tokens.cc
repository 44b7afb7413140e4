// cli/pack_tokens.cc — `stoker pack-tokens INPUT... -o PREFIX`: token arrays
// into a Megatron indexed dataset (PREFIX.bin + PREFIX.idx) that
// megatron-core's IndexedDataset opens. Inputs: .npy files (a 1-D integer
// array is one document; a 2-D array is one document per row) and JSON lines
// files (.jsonl/.json: per line a list of token ids, or an object whose
// --key field is that list). Each document is one sequence. The dtype is the
// smallest megatron would pick for the vocabulary (uint16 below 65500 ids,
// else int32): from --vocab-size, or from a first pass over the inputs.
// Also `inspect_tokens`: what `stoker inspect X.idx` prints.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "core/file.h"
#include "formats/megatron_index.h"
#include "formats/npy.h"

namespace stoker::cli {
namespace {

struct PackTokensOptions {
  std::vector<std::string> inputs;
  std::string out_prefix;
  int64_t vocab_size = 0;
  std::string key = "tokens";
  std::string tokenizer;
  bool quiet = false;
};

bool EndsWith(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Calls fn(document) for every document of one input file.
template <typename Fn>
Status ForEachDocument(const std::string& path, const std::string& key, Fn fn) {
  std::vector<int64_t> doc;
  if (EndsWith(path, ".npy")) {
    STOKER_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
    std::span<const uint8_t> npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    Result<ArrayInfo> info = ParseNpyHeader(npy);
    if (!info.ok()) return info.status().WithContext(path);
    if (info->shape.empty() || info->shape.size() > 2) return InvalidArgument(path + ": expected a 1-D or 2-D array");
    std::vector<uint8_t> raw(info->nbytes());
    STOKER_RETURN_IF_ERROR(CopyNpyData(*info, npy, raw).WithContext(path));
    const size_t n = info->num_elements();
    std::vector<int64_t> all(n);
    auto widen = [&](auto tag) {
      using T = decltype(tag);
      for (size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
        all[i] = static_cast<int64_t>(v);
      }
    };
    switch (info->dtype) {
      case DType::kU8: widen(uint8_t{}); break;
      case DType::kI8: widen(int8_t{}); break;
      case DType::kU16: widen(uint16_t{}); break;
      case DType::kI16: widen(int16_t{}); break;
      case DType::kU32: widen(uint32_t{}); break;
      case DType::kI32: widen(int32_t{}); break;
      case DType::kU64: widen(uint64_t{}); break;
      case DType::kI64: widen(int64_t{}); break;
      default: return InvalidArgument(path + ": " + DTypeName(info->dtype) + " is not an integer dtype");
    }
    const size_t rows = info->shape.size() == 1 ? 1 : static_cast<size_t>(info->shape[0]);
    const size_t cols = rows ? n / rows : 0;
    for (size_t r = 0; r < rows; ++r) STOKER_RETURN_IF_ERROR(fn(std::span<const int64_t>(all.data() + r * cols, cols)));
    return Status::Ok();
  }
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot open");
  std::string line;
  for (uint64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains(key)) j = j[key];
    if (j.is_discarded() || !j.is_array()) {
      return InvalidArgument(path + ": line " + std::to_string(lineno) + " is not a JSON list of token ids (or an "
                             "object with '" + key + "')");
    }
    doc.clear();
    for (const auto& v : j) {
      if (!v.is_number_integer()) return InvalidArgument(path + ": line " + std::to_string(lineno) + ": not an integer");
      doc.push_back(v.get<int64_t>());
    }
    STOKER_RETURN_IF_ERROR(fn(std::span<const int64_t>(doc)));
  }
  return Status::Ok();
}

Status RunPackTokens(const PackTokensOptions& o) {
  if (!o.tokenizer.empty()) {
    // Hugging Face tokenizers are Rust with no C++ API: the Python package's
    // `stoker` command tokenizes (python/stoker/pack_text.py), then writes
    // with this command's MegatronWriter.
    return InvalidArgument("--tokenizer " + o.tokenizer + ": tokenizing text runs in the Python package: use the "
                           "`stoker` command pip installs (or python -m stoker.pack_text), not the bare binary");
  }
  uint64_t total_bytes = 0;
  for (const std::string& p : o.inputs) {
    STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(p));
    STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
    total_bytes += size;
  }
  int64_t max_id = o.vocab_size - 1;
  if (o.vocab_size <= 0) {
    Progress scan("scan", o.inputs.size(), total_bytes, o.quiet);
    for (const std::string& p : o.inputs) {
      STOKER_RETURN_IF_ERROR(ForEachDocument(p, o.key, [&](std::span<const int64_t> d) {
        for (int64_t t : d) max_id = std::max(max_id, t);
        return Status::Ok();
      }));
      STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(p));
      STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
      scan.Add(1, size);
    }
  }
  const DType dtype = MegatronTokenDType(max_id);
  STOKER_ASSIGN_OR_RETURN(auto writer, MegatronWriter::Create(o.out_prefix, dtype));
  uint64_t docs = 0;
  {
    Progress progress("pack-tokens", o.inputs.size(), total_bytes, o.quiet);
    for (const std::string& p : o.inputs) {
      STOKER_RETURN_IF_ERROR(ForEachDocument(p, o.key, [&](std::span<const int64_t> d) {
        ++docs;
        return writer->AddDocument(d).WithContext(p);
      }));
      STOKER_ASSIGN_OR_RETURN(File f, File::OpenRead(p));
      STOKER_ASSIGN_OR_RETURN(uint64_t size, f.Size());
      progress.Add(1, size);
    }
  }
  // No document (or only empty ones: a --key that names no field, empty
  // lines) is refused by Finish, naming the output; the inputs are added.
  STOKER_RETURN_IF_ERROR(writer->Finish().WithContext("pack-tokens of " + std::to_string(o.inputs.size()) +
                                                      " input(s), --key '" + o.key + "'"));
  if (!o.quiet) {
    std::printf("%s.{bin,idx}: %llu documents, %llu tokens, %s\n", o.out_prefix.c_str(),
                static_cast<unsigned long long>(docs), static_cast<unsigned long long>(writer->tokens()),
                DTypeName(dtype));
  }
  return Status::Ok();
}

}  // namespace

Status InspectTokens(const std::string& path, bool json) {
  std::string prefix = path;
  if (EndsWith(prefix, ".idx") || EndsWith(prefix, ".bin")) prefix.resize(prefix.size() - 4);
  STOKER_ASSIGN_OR_RETURN(auto data, MegatronDataset::Open(prefix));
  const auto& lengths = data->sequence_lengths();
  int64_t tokens = 0, lo = lengths.empty() ? 0 : lengths[0], hi = 0;
  for (int32_t l : lengths) tokens += l, lo = std::min<int64_t>(lo, l), hi = std::max<int64_t>(hi, l);
  std::vector<int32_t> sorted(lengths);
  std::sort(sorted.begin(), sorted.end());
  const int64_t median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double mean = lengths.empty() ? 0.0 : double(tokens) / double(lengths.size());
  const uint64_t documents = data->document_indices().size() - 1;
  if (json) {
    nlohmann::ordered_json out = {{"prefix", prefix},
                                  {"dtype", DTypeName(data->dtype())},
                                  {"dtype_code", data->dtype_code()},
                                  {"documents", documents},
                                  {"sequences", lengths.size()},
                                  {"tokens", tokens},
                                  {"bin_bytes", data->bin_bytes()},
                                  {"length", {{"min", lo}, {"median", median}, {"mean", mean}, {"max", hi}}}};
    std::printf("%s\n", out.dump(2).c_str());
    return Status::Ok();
  }
  std::printf("megatron  %s.{bin,idx} (%s)\ndtype     %s (code %u)\ndocuments %llu (%zu sequences)\n"
              "tokens    %lld\nlengths   min %lld, median %lld, mean %.1f, max %lld\n",
              prefix.c_str(), FormatBytes(double(data->bin_bytes())).c_str(), DTypeName(data->dtype()),
              unsigned(data->dtype_code()), static_cast<unsigned long long>(documents), lengths.size(),
              static_cast<long long>(tokens), static_cast<long long>(lo), static_cast<long long>(median), mean,
              static_cast<long long>(hi));
  return Status::Ok();
}

void RegisterPackTokens(CLI::App& app, Status* status) {
  auto opt = std::make_shared<PackTokensOptions>();
  CLI::App* cmd = app.add_subcommand("pack-tokens", "Write token arrays (.npy, JSON lines) as a Megatron .bin/.idx pair");
  cmd->add_option("INPUT", opt->inputs, ".npy or .jsonl files; each array or line is one document")->required();
  cmd->add_option("-o,--output", opt->out_prefix, "output prefix (writes PREFIX.bin and PREFIX.idx)")->required();
  cmd->add_option("--vocab-size", opt->vocab_size, "vocabulary size (else the largest id seen + 1)");
  cmd->add_option("--key", opt->key, "JSON lines: the field holding the ids when a line is an object")
      ->capture_default_str();
  cmd->add_option("--tokenizer", opt->tokenizer,
                  "tokenize text (.jsonl/.parquet) with a tokenizers JSON or transformers folder: handled by the "
                  "Python package's `stoker` command");
  cmd->add_flag("-q,--quiet", opt->quiet, "no progress, no summary");
  cmd->callback([=] { *status = RunPackTokens(*opt); });
}

}  // namespace stoker::cli
