// cli/common.cc — see common.h.
#include "cli/common.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace stoker::cli {

Result<uint64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return InvalidArgument("bad size '" + std::string(text) + "': expected e.g. 256MB, 1GiB, 4096");
  double number = std::strtod(std::string(text.substr(0, i)).c_str(), nullptr);
  std::string unit;
  for (char c : text.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const struct { const char* name; double factor; } kUnits[] = {
      {"", 1},       {"b", 1},          {"k", 1e3},         {"kb", 1e3},         {"m", 1e6},
      {"mb", 1e6},   {"g", 1e9},        {"gb", 1e9},        {"t", 1e12},         {"tb", 1e12},
      {"kib", 1024}, {"mib", 1048576.}, {"gib", 1073741824.}, {"tib", 1099511627776.}};
  for (const auto& u : kUnits) {
    if (unit == u.name) {
      double bytes = number * u.factor;
      if (bytes < 1) return InvalidArgument("size '" + std::string(text) + "' is below one byte");
      return static_cast<uint64_t>(std::llround(bytes));
    }
  }
  return InvalidArgument("bad size unit in '" + std::string(text) + "': use B, KB, MB, GB, KiB, MiB, GiB");
}

std::string FormatBytes(double bytes) {
  static const char* kNames[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) bytes /= 1000, ++unit;
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", bytes, kNames[unit]);
  return text;
}

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      // Compare the runs by value without overflow: strip leading zeros, then length, then text.
      size_t iz = i, jz = j;
      while (iz + 1 < ie && a[iz] == '0') ++iz;
      while (jz + 1 < je && b[jz] == '0') ++jz;
      if (ie - iz != je - jz) return ie - iz < je - jz;
      if (int c = a.substr(iz, ie - iz).compare(b.substr(jz, je - jz)); c != 0) return c < 0;
      i = ie, j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
    }
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;  // equal up to zero padding: fall back to a total order
}

Result<std::vector<SampleEntry>> GroupWithRule(const std::vector<TarMember>& members,
                                               const std::string& rule_name,
                                               const std::string& shard_path, KeyRule* rule) {
  if (rule_name != "auto") {
    STOKER_ASSIGN_OR_RETURN(*rule, ParseKeyRule(rule_name));
    return GroupSamples(members, *rule, shard_path);
  }
  auto webdataset = GroupSamples(members, KeyRule::kWebDataset, shard_path);
  auto underscore = GroupSamples(members, KeyRule::kUnderscoreSuffix, shard_path);
  if (underscore.ok() && (!webdataset.ok() || underscore->size() < webdataset->size())) {
    *rule = KeyRule::kUnderscoreSuffix;
    return underscore;
  }
  *rule = KeyRule::kWebDataset;
  return webdataset;
}

Status WriteIndexAtomically(const ShardIndex& index) { return WriteIndexAtomically(index, IndexPathFor(index.shard_path)); }

Status WriteIndexAtomically(const ShardIndex& index, const std::string& path) {
  const std::string tmp = path + ".tmp";
  Status status = WriteShardIndex(index, tmp);
  std::error_code ec;
  if (status.ok()) {
    std::filesystem::rename(tmp, path, ec);
    if (!ec) return Status::Ok();
    status = IoError(path + ": rename: " + ec.message());
  }
  std::filesystem::remove(tmp, ec);
  return status;
}

}  // namespace stoker::cli
