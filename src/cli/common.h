// cli/common.h — small helpers shared by the subcommands: byte sizes in and
// out, natural ordering of names, a seeded generator whose stream is the same
// on every platform, and the "auto" key rule of index and inspect.
// Thread-safety: free functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/random.h"
#include "formats/sample_index.h"
#include "stoker/status.h"

namespace stoker::cli {

// "256MB" (10^6), "1GiB" (2^30), "64k", "12345" -> bytes.
Result<uint64_t> ParseByteSize(std::string_view text);
// 1234567 -> "1.23 MB".
std::string FormatBytes(double bytes);

// Orders "sa_2" before "sa_10": digit runs compare by value.
bool NaturalLess(std::string_view a, std::string_view b);

// synth's and pack's seeded choices: the shared SplitMix64 (output must be
// identical everywhere for a given seed).
using Rng = SplitMix64;

// Groups a shard's members by a key rule named "webdataset", "underscore" or
// "auto" (underscore when it joins members that webdataset would split, and
// the shard groups cleanly under it). Sets *rule to the one used.
Result<std::vector<SampleEntry>> GroupWithRule(const std::vector<TarMember>& members,
                                               const std::string& rule_name,
                                               const std::string& shard_path, KeyRule* rule);

// Writes the index sidecar of a shard through a temporary name, so a reader
// never sees a half-written one.
Status WriteIndexAtomically(const ShardIndex& index);
// The same at another path (a remote shard's sidecar, written locally for upload).
Status WriteIndexAtomically(const ShardIndex& index, const std::string& path);

}  // namespace stoker::cli
