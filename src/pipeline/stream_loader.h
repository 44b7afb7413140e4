// pipeline/stream_loader.h — the Loader of stream mode (LoaderOptions::stream):
// tar shards with no index read front to back, as webdataset does (README,
// "Stream mode"). No shard is counted or indexed: the first batch costs the
// first shard's first bytes. Epochs are samples_per_epoch long (webdataset's
// with_epoch): every rank delivers samples_per_epoch / (world_size *
// batch_size) batches each, cut from its one stream (stream_run.h), so an
// epoch continues where the previous one stopped.
// Thread-safety: as Loader's.
#pragma once

#include <memory>

#include "stoker/loader.h"

namespace stoker {

// Checks the options (what stream mode refuses, and why) and builds the loader.
Result<std::unique_ptr<Loader>> CreateStreamLoader(LoaderOptions options);

}  // namespace stoker
