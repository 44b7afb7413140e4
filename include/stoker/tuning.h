// stoker/tuning.h — what the online controller set and why (Loader::Settings,
// Loader::TakeTuneLog). The controller itself is src/pipeline/autotune.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoker {

// The settings in effect now. A knob the user passed is fixed: the
// controller never moves it (listed in `fixed`).
struct LoaderSettings {
  bool autotune = false;
  int io_depth = 0;             // reads in flight (readers)
  int read_ahead_batches = 0;   // batches read before their buffer exists (remote shards)
  int decode_threads = 0;       // decoders running
  int prefetch_batches = 0;     // whole batches made ahead of the consumer
  std::vector<std::string> fixed;  // names of the knobs the user set
  int cores = 0;                // the CPUs the defaults scale with: this process's share
  std::string cores_from;       // "1 core: affinity 2, no quota, 2 local ranks (LOCAL_WORLD_SIZE)"
  // GPU decode (pipeline/gpu_decode.h): the decoder ("" none), the share of
  // each batch's images sent to it, and why (or why there is no decoder).
  std::string gpu_decoder;
  double gpu_share = 0;
  std::string gpu_share_why;
  // The shard index tables (pipeline/shard_index_cache.h): bytes held now,
  // their bound (0: none, every table stays), loads so far (again after
  // being dropped, too) and the shards.
  // "indexed" (plans from the shards' counts) or "stream" (LoaderOptions::stream,
  // with its epoch length and shuffle buffer: 1 is stream order).
  std::string mode = "indexed";
  int64_t stream_samples_per_epoch = 0;
  int stream_shuffle_buffer = 0;
  std::string order;  // the epoch order in words, and why where the loader chose it
  uint64_t index_held_bytes = 0;
  uint64_t index_max_bytes = 0;
  uint64_t index_loads = 0;
  uint64_t index_shards = 0;
  std::string index_from;          // where the shards' counts came from ("the manifest ...", "20 index sidecars")
  uint64_t index_remote_read = 0;  // remote shards read whole to count their samples (no sidecar, no manifest)
  // Image fields whose resize can scale up (not resize="none" or
  // random_resized_crop): images decoded on the CPU so far, how many of them
  // were scaled up, and the first such image's size (pipeline/upscale_count.h).
  struct Upscale {
    std::string field;
    uint64_t images = 0, upscaled = 0;
    int first_width = 0, first_height = 0;
    int height = 0, width = 0;  // the field's output size
  };
  std::vector<Upscale> upscales;
};

// One change the controller made, with the evidence it acted on.
struct TuneChange {
  double time_s = 0;      // since the loader was made
  std::string knob;       // "io_depth", "read_ahead_batches", "decode_threads", "prefetch"
  int from = 0, to = 0;
  std::string reason;     // "reads wait 21 ms each, readers busy 96%, decoders idle 60%"
  // "io_depth 4 → 12: reads wait 21 ms each, ..." — the line that is logged.
  std::string Line() const { return knob + " " + std::to_string(from) + " \u2192 " + std::to_string(to) + ": " + reason; }
};

}  // namespace stoker
