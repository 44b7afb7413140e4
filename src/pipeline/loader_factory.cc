// pipeline/loader_factory.cc — Loader::Create: the checks every mode shares,
// then the order source's loader: the stream's (stream_loader.h) or the
// indexed one (indexed_loader.h), tokens and mixtures included.
#include "pipeline/indexed_loader.h"
#include "pipeline/stream_loader.h"
#include "stoker/loader.h"

namespace stoker {

Result<std::unique_ptr<Loader>> Loader::Create(LoaderOptions options) {
  if (options.batch_size < 1) return InvalidArgument("batch_size must be at least 1");
  if (options.prefetch_batches < 1 && options.prefetch_batches != -1) {
    return InvalidArgument("prefetch_batches must be at least 1 (or -1: auto)");
  }
  if (options.stream) return CreateStreamLoader(std::move(options));
  if (options.samples_per_epoch != 0) {
    return InvalidArgument("samples_per_epoch is the length of a stream's epoch: it needs stream=True (an indexed "
                           "loader's epoch is the dataset)");
  }
  return CreateIndexedLoader(std::move(options));
}

}  // namespace stoker
