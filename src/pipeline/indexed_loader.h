// pipeline/indexed_loader.h — the Loader of the indexed mode: shards with
// an index (tar with sidecars or a manifest, Parquet files, image folders,
// token datasets, mixtures of them), an order computed per epoch over it
// (planner.h), and its threads one epoch at a time (epoch_run.h).
// Thread-safety: as Loader's.
#pragma once

#include <memory>

#include "stoker/loader.h"

namespace stoker {

// Checks the options (the indexed mode's; loader_factory.cc checked what
// both modes share), reads the shards' summaries and the first sample, and
// builds the loader with its first batch begun.
Result<std::unique_ptr<Loader>> CreateIndexedLoader(LoaderOptions options);

}  // namespace stoker
