// pipeline/sample_keys.h — the names a batch gives its samples: `__key__` and
// `__url__`, as the ecosystem names them, so keys join with metadata and
// compare with webdataset's without stripping anything.
//   tar shards:    key = the member path up to the first dot of its basename
//                  ("dir/000000", webdataset's), url = the shard as given
//                  (after brace, glob and list expansion), as wds.WebDataset's
//                  __key__ and __url__;
//   image folders: key = the file's path relative to the root, its basename
//                  cut at the first dot ("cat/000001"), which is also the key
//                  `stoker pack` writes for that file; url = the file's path;
//   Parquet:       key = the row's value in LoaderOptions::key_column when one
//                  is named (a string column's text, a number's decimal
//                  text), else "file:row" (row = the row's number in its
//                  file); url = the file as given.
// These keys need not be unique across shards (two shards may both hold
// "000000"). Inside stoker a sample is named by its shard and key together
// (InternalKey: skip records, errors), which is unique.
// Thread-safety: free functions.
#pragma once

#include <span>
#include <string>

#include "formats/sample_index.h"
#include "stoker/loader.h"

namespace stoker {

// "shard:key", unique within a loader's dataset.
std::string InternalKey(const std::string& shard, SampleView entry);

// The key a batch's `keys()` holds for a sample. `entry` is the one the
// decoder read (a Parquet row's own, whose members point into `bytes`).
// Fails only when key_column names a column the row lacks.
Result<std::string> UserKey(const LoaderOptions& options, const std::string& shard, SampleView entry,
                            std::span<const uint8_t> bytes);

}  // namespace stoker
