// cli/infer_fields.h — field specs guessed from a shard's first sample, so
// `stoker doctor`, `bench` and `inspect` run without -f: an image member
// (by content: JPEG, PNG, WebP) -> FIELD:image:224, .npy -> npy, .npz ->
// npz, a member whose text is one integer -> FIELD:scalar. Other members
// (captions, JSON) are left out: they cost nothing to skip. The commands
// print what they inferred as the -f flags to pass. A Parquet file's fields
// come from its footer: the column types say what reads each.
// Thread-safety: free functions.
#pragma once

#include <string>
#include <vector>

#include "stoker/key_rule.h"
#include "stoker/status.h"

namespace stoker::cli {

// "--field" strings for the first sample of `shard`; empty when nothing fits.
Result<std::vector<std::string>> InferFields(const std::string& shard, KeyRule rule);

// "--field" strings for the columns of a Parquet file stoker reads
// (formats/parquet_file.h: DescribeParquet's suggestions); the footer alone.
Result<std::vector<std::string>> InferParquetFields(const std::string& path);

// "-f a -f b" for messages.
std::string FieldFlags(const std::vector<std::string>& fields);

}  // namespace stoker::cli
