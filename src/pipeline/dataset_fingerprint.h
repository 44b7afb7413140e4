// pipeline/dataset_fingerprint.h — an indexed dataset's identity, which a
// saved state carries so that it restores only onto the same samples:
// shard base names, sizes and sample counts (a dataset moved elsewhere, or
// a signed URL's new query, still matches; a changed one does not).
// Thread-safety: a pure function of the shards' summaries.
#pragma once

#include <string>

#include "pipeline/dataset.h"

namespace stoker {

// 16 hex digits (FNV-1a 64 over the summaries).
std::string DatasetFingerprint(const Dataset& data);

}  // namespace stoker
