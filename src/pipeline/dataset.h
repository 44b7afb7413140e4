// pipeline/dataset.h — what a run's threads read, fixed for the loader's
// life (but for `tuned`, which the loader changes between batches on its
// consumer thread and hands to the run through its Apply).
//
// EngineData is what every order source's run shares: the options, the
// batch layout, the tuner's settings, the recorder, and the engine's stages
// after a sample's bytes exist (decoders counting upscales, the device
// stage, GPU decode). Each order source adds its own part:
//  * Dataset, the indexed mode's (epoch_run.h): the shards' indexes, the
//    order in words, Parquet rows, token windows;
//  * StreamDataset, the stream's (stream_run.h): the epoch's length.
// The loader fills them on its consumer thread before the first run
// starts; a run's threads only read them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer_pool.h"
#include "core/cpu_share.h"
#include "formats/parquet_file.h"
#include "observe/recorder.h"
#include "pipeline/autotune.h"
#include "pipeline/batch_layout.h"
#include "pipeline/shard_index_cache.h"
#include "pipeline/token_source.h"
#include "pipeline/upscale_count.h"
#include "stoker/loader.h"

namespace stoker {

class DeviceStage;
class GpuDecode;

struct EngineData {
  LoaderOptions options;  // resolved: the auto settings are plain numbers here
  Recorder* recorder = nullptr;  // null when record_stats is off; owned by the loader
  std::vector<std::string> shards;
  BatchLayout layout;
  // The knobs in effect (io_depth, read_ahead_batches, decode_threads,
  // prefetch) and the most the controller may set; a new run starts with
  // `tuned`. Written by the loader on its consumer thread, read by a run's
  // constructor there; the run's threads read their own copies.
  TuneSettings tuned, tune_max;
  // The CPUs this loader counted when made (core/cpu_share.h): the defaults
  // that scale with cores start from cpu.cores; Settings() says where it came from.
  CpuShare cpu;
  // Image fields' upscaled images, counted by the decoders (upscale_count.h).
  std::shared_ptr<UpscaleCounter> upscales;
  // Set when batches go to a device: each batch's copy is issued as it
  // becomes ready (device_stage.h, batch_in_flight.h).
  std::shared_ptr<DeviceStage> device;
  // Set when image fields decode on that device too (its copies run the GPU work).
  std::shared_ptr<GpuDecode> gpu;
  std::string gpu_why_not;  // image fields that could decode there but do not: why (auto without a decoder)
};

// The indexed mode's (epoch_run.h): shards with an index, a plan per epoch.
struct Dataset : EngineData {
  // Each shard's summary (what the plan and the estimates need) and sample
  // offsets, the latter loaded as reads reach the shard (shard_index_cache.h).
  std::shared_ptr<ShardIndexCache> indexes;
  std::string order;             // the order in words (planner.h's DescribeOrder), and why where auto
  std::string index_from;        // where the shards' counts came from (ShardTables::from)
  uint64_t remote_scanned = 0;   // remote shards read whole to count them
  bool parquet = false;          // some shards are Parquet files (all, but in a mixture)
  uint64_t row_group_bytes = 0;  // Parquet: the largest row group
  // Set for a token loader: readers copy each sample's token window from the
  // mmap'd .bin straight into its slot (read and assembly are one copy), so
  // no decoder threads run and tasks cover several slots.
  std::shared_ptr<const TokenSource> tokens;
  // Set when any shard is a Parquet file: its rows' values, from decoded row
  // groups it caches (formats/parquet_file.h; internally synchronized).
  std::shared_ptr<ParquetRows> parquet_rows;
};

// The stream mode's (stream_run.h): tar shards read front to back, no index.
struct StreamDataset : EngineData {
  int64_t epoch_batches = 1;  // the loader's batches per epoch: spans name a batch within its epoch
  // A mixture's (options.mix): each source's first shard (SourceFirstShards)
  // and the members its fields are read from (null: their own names).
  std::vector<uint32_t> first_shards;
  std::vector<std::shared_ptr<const FieldAliases>> aliases;
};

// Sets data->gpu for the image fields of `options` that decode on the
// batches' device (GpuDecode::Create over data->layout; why not, in
// data->gpu_why_not) and hands it to the device stage, whose copies run its
// work. Once the layout is final (a map's arrays added).
Status AddGpuDecode(const LoaderOptions& options, EngineData* data);

// The batch buffers: the most prefetch the controller may set (tune_max)
// and the batch in use, made as first needed (a run's gate holds the
// prefetch in effect), page-locked when the device stage pins; the device
// stage keeps as many device buffers for reuse.
std::shared_ptr<BufferPool> MakeBatchPool(const EngineData& data);

}  // namespace stoker
