// python/loader_binding.cc — stoker::Loader and its option structs for Python.
// Thin by design: every call forwards to C++ with the GIL released where it
// may block or compute; python/stoker/loader.py adds the torch glue.
#include <string>
#include <tuple>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "device/cuda_runtime.h"
#include "python/array_binding.h"
#include "io/url.h"
#include "python/status_binding.h"
#include "stoker/loader.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::python {

namespace {

// An ImageSpec's fields in declaration order: its pickled state.
using ImageSpecState = std::tuple<int, int, ResizeMode, bool, bool, std::array<float, 2>, std::array<float, 2>,
                                  Resample, int, PixelType, bool, std::array<float, 3>, std::array<float, 3>,
                                  ImageDecode, int, bool, int64_t>;
// A FieldSpec's pickled state: field, kind, image, dtype's name, max_bytes.
using FieldSpecState = std::tuple<std::string, FieldKind, ImageSpec, std::string, size_t>;

// One batch as (index, [(name, numpy view)], keys, urls, [(slot, cause)]);
// the views share the batch; the last list names the slots left for the
// rank's refills (Batch::failures), usually none.
nb::object BatchToPython(std::shared_ptr<Batch> batch) {
  nb::list arrays;
  for (const stoker::ArrayView& view : batch->arrays()) {
    arrays.append(nb::make_tuple(view.name, ArrayView(view, batch)));
  }
  nb::list keys, urls, failures;
  for (const std::string& k : batch->keys()) keys.append(k);
  for (const std::string& u : batch->urls()) urls.append(u);
  for (const SlotFailure& f : batch->failures()) failures.append(nb::make_tuple(f.slot, f.cause));
  return nb::make_tuple(batch->index(), arrays, keys, urls, failures);
}

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// A batch another share made, as Loader::Receive takes it (the arrays are
// only read, while the call holds them).
ReceivedBatch Received(int64_t index, const std::vector<std::pair<std::string, HostArray>>& arrays,
                       std::vector<std::string> keys, std::vector<std::string> urls,
                       const std::vector<std::pair<int, std::string>>& failures) {
  ReceivedBatch in;
  in.index = index;
  for (const auto& [name, a] : arrays) {
    stoker::ArrayView v;
    v.name = name;
    v.data = const_cast<uint8_t*>(static_cast<const uint8_t*>(a.data()));
    v.nbytes = a.nbytes();
    in.arrays.push_back(std::move(v));
  }
  in.keys = std::move(keys);
  in.urls = std::move(urls);
  for (const auto& [slot, cause] : failures) in.failures.push_back({slot, cause});
  return in;
}

// A delivered batch for Python: `stream` (device batches) waits for its copy first.
nb::object Delivered(Result<std::shared_ptr<Batch>> batch, uintptr_t stream) {
  std::shared_ptr<Batch> b = ValueOrRaise(std::move(batch));
  if (!b) return nb::none();
  Status needed = [&] {
    nb::gil_scoped_release release;
    return b->NeededOn(stream);
  }();
  OkOrRaise(needed);
  return BatchToPython(std::move(b));
}

// A batch received ahead of its step (RayWorkers with a device): its copy to
// the device issued, the consumer's stream not yet made to wait; deliver()
// does that when the step takes it, as next() does for a local batch.
struct PendingDelivery {
  std::shared_ptr<Batch> batch;
};

nb::dict StageToPython(const StageSnapshot& s) {
  nb::dict d;
  d["items"] = s.items;
  d["bytes"] = s.bytes;
  d["busy_s"] = s.busy_s;
  return d;
}

// The recorder snapshot as a plain dict; the observer diffs two of them.
nb::dict StatsToPython(const RecorderSnapshot& s) {
  nb::dict d;
  d["time_s"] = s.time_s;
  d["read"] = StageToPython(s.read);
  d["decode"] = StageToPython(s.decode);
  d["map"] = StageToPython(s.map);
  nb::list sources;  // a mixture's reads by source, in source order
  for (const StageSnapshot& r : s.source_reads) sources.append(StageToPython(r));
  d["source_reads"] = sources;
  d["read_queue_put_wait_s"] = s.read_queue_put_wait_s;
  d["read_queue_get_wait_s"] = s.read_queue_get_wait_s;
  d["decode_queue_put_wait_s"] = s.decode_queue_put_wait_s;
  d["decode_queue_get_wait_s"] = s.decode_queue_get_wait_s;
  d["pool_wait_s"] = s.pool_wait_s;
  d["consumer_wait_s"] = s.consumer_wait_s;
  d["batches_delivered"] = s.batches_delivered;
  d["batches_carried"] = s.batches_carried;
  d["reads_in_flight"] = s.reads_in_flight;
  d["decodes_in_flight"] = s.decodes_in_flight;
  d["decode_queue_depth"] = s.decode_queue_depth;
  d["batches_ready"] = s.batches_ready;
  d["batches_in_progress"] = s.batches_in_progress;
  d["io_depth"] = s.io_depth;
  d["decode_threads"] = s.decode_threads;
  nb::list buckets;
  for (uint64_t c : s.read_latency) buckets.append(c);
  d["read_latency_buckets"] = buckets;  // bucket i: [2^(i-1), 2^i) microseconds
  d["spans_dropped"] = s.spans_dropped;
  nb::dict h2d;  // device copies (device='cuda'), counted as each completed
  h2d["copies"] = s.h2d_copies;
  h2d["bytes"] = s.h2d_bytes;
  h2d["copy_s"] = s.h2d_s;
  h2d["exposed_s"] = s.h2d_exposed_s;
  h2d["hidden_s"] = s.h2d_s > s.h2d_exposed_s ? s.h2d_s - s.h2d_exposed_s : 0.0;
  h2d["untimed"] = s.h2d_untimed;
  h2d["device_buffers"] = s.device_buffers;
  h2d["device_buffers_peak"] = s.device_buffers_peak;
  h2d["pinned_buffers"] = s.pinned_buffers;
  h2d["overwrites"] = s.h2d_overwrites;
  h2d["early"] = s.h2d_early;  // issued as the batch became ready (before it was asked for)
  h2d["at_delivery"] = s.h2d_at_delivery;
  d["h2d"] = h2d;
  if (!s.gpu_decoder.empty()) {  // image fields decoded on the device (decode="auto"/"gpu")
    nb::dict gpu;
    gpu["decoder"] = s.gpu_decoder;
    gpu["share"] = s.gpu_share;
    gpu["why"] = s.gpu_share_why;
    gpu["gpu_images"] = s.gpu_images;
    gpu["cpu_images"] = s.gpu_cpu_images + s.gpu_cpu_fallbacks;
    nb::dict fallbacks;
    for (const auto& [reason, n] : s.gpu_refused) fallbacks[reason.c_str()] = n;
    gpu["fallbacks"] = fallbacks;
    // The watchdog turned the GPU decoder off (device/hardware_batcher.h): why; absent while it works.
    if (!s.gpu_failure.empty()) gpu["failed"] = s.gpu_failure;
    d["gpu_decode"] = gpu;
  }
  nb::dict remote;  // process-wide (every remote reader of the process)
  remote["requests"] = s.remote_requests;
  remote["retries"] = s.remote_retries;
  remote["throttled"] = s.remote_throttled;
  remote["failures"] = s.remote_failures;
  remote["retrying"] = s.remote_retrying;
  remote["outage_s"] = s.remote_outage_s;
  remote["last_fault"] = s.remote_last_fault;
  remote["cache_hits"] = s.cache_hits;
  remote["cache_misses"] = s.cache_misses;
  nb::list ms;
  for (uint64_t c : s.remote_latency_ms_log2) ms.append(c);
  remote["latency_ms_log2"] = ms;  // bucket i: requests that took < 2^i ms
  d["remote"] = remote;
  return d;
}

nb::list ChangesToPython(const std::vector<TuneChange>& changes) {
  nb::list out;
  for (const TuneChange& c : changes) {
    nb::dict d;
    d["time_s"] = c.time_s;
    d["knob"] = c.knob;
    d["from"] = c.from;
    d["to"] = c.to;
    d["reason"] = c.reason;
    d["line"] = c.Line();
    out.append(d);
  }
  return out;
}

}  // namespace

void RegisterLoader(nb::module_& m) {
  nb::enum_<ResizeMode>(m, "ResizeMode")
      .value("none", ResizeMode::kNone)
      .value("stretch", ResizeMode::kStretch)
      .value("center_crop", ResizeMode::kShorterCenterCrop)
      .value("longest", ResizeMode::kLongestPad)
      .value("random_resized_crop", ResizeMode::kRandomResizedCrop);
  nb::enum_<PixelType>(m, "PixelType").value("uint8", PixelType::kUint8).value("float32", PixelType::kFloat32);
  nb::enum_<FieldKind>(m, "FieldKind")
      .value("image", FieldKind::kImage)
      .value("npy", FieldKind::kNpy)
      .value("npz", FieldKind::kNpz)
      .value("scalar", FieldKind::kScalar)
      .value("bytes", FieldKind::kBytes)
      .value("text", FieldKind::kText)
      .value("json", FieldKind::kJson)
      .value("msgpack", FieldKind::kMsgpack)
      .value("pickle", FieldKind::kPickle);
  nb::enum_<KeyRule>(m, "KeyRule")
      .value("webdataset", KeyRule::kWebDataset)
      .value("underscore", KeyRule::kUnderscoreSuffix);
  nb::enum_<PartitionPolicy>(m, "PartitionPolicy")
      .value("drop", PartitionPolicy::kDropRemainder)
      .value("pad", PartitionPolicy::kPadRepeat)
      .value("exact", PartitionPolicy::kExact);
  nb::enum_<OnError>(m, "OnError").value("raise_", OnError::kRaise).value("skip", OnError::kSkip);

  nb::enum_<ImageDecode>(m, "ImageDecode")
      .value("auto", ImageDecode::kAuto)
      .value("cpu", ImageDecode::kCpu)
      .value("gpu", ImageDecode::kGpu);

  nb::enum_<Resample>(m, "Resample")
      .value("bilinear", Resample::kBilinear)
      .value("bicubic", Resample::kBicubic)
      .value("box", Resample::kBox);

  nb::class_<ImageSpec>(m, "ImageSpec")
      .def(nb::init<>())
      .def_rw("height", &ImageSpec::height)
      .def_rw("width", &ImageSpec::width)
      .def_rw("mode", &ImageSpec::mode)
      .def_rw("chw", &ImageSpec::chw)
      .def_rw("random_hflip", &ImageSpec::random_hflip)
      .def_rw("scale", &ImageSpec::scale)
      .def_rw("ratio", &ImageSpec::ratio)
      .def_rw("resample", &ImageSpec::resample)
      .def_rw("resize_to", &ImageSpec::resize_to)
      .def_rw("pixel", &ImageSpec::pixel)
      .def_rw("normalize", &ImageSpec::normalize)
      .def_rw("mean", &ImageSpec::mean)
      .def_rw("std", &ImageSpec::std)
      .def_rw("decode", &ImageSpec::decode)
      .def_rw("channels", &ImageSpec::channels)
      .def_rw("variable", &ImageSpec::variable)
      .def_rw("max_pixels", &ImageSpec::max_pixels)
      .def("output_shape", &ImageSpec::OutputShape)
      // Specs pickle (Ray actors, DataLoader workers, a spawned Lightning
      // DataModule carry them to other processes): every field, by value.
      .def("__getstate__",
           [](const ImageSpec& s) {
             return std::make_tuple(s.height, s.width, s.mode, s.chw, s.random_hflip, s.scale, s.ratio, s.resample,
                                    s.resize_to, s.pixel, s.normalize, s.mean, s.std, s.decode, s.channels,
                                    s.variable, s.max_pixels);
           })
      .def("__setstate__", [](ImageSpec& s, const ImageSpecState& t) {
        new (&s) ImageSpec();
        std::tie(s.height, s.width, s.mode, s.chw, s.random_hflip, s.scale, s.ratio, s.resample, s.resize_to,
                 s.pixel, s.normalize, s.mean, s.std, s.decode, s.channels, s.variable, s.max_pixels) = t;
      });

  nb::class_<FieldSpec>(m, "FieldSpec")
      .def(nb::init<>())
      .def_rw("field", &FieldSpec::field)
      .def_rw("kind", &FieldSpec::kind)
      .def_rw("image", &FieldSpec::image)
      .def_prop_rw(
          "dtype", [](const FieldSpec& f) { return std::string(DTypeName(f.dtype)); },
          [](FieldSpec& f, const std::string& name) { f.dtype = ValueOrRaise(ParseDTypeName(name)); })
      .def_rw("max_bytes", &FieldSpec::max_bytes)
      .def(
          "named",
          [](FieldSpec spec, std::string field) {
            spec.field = std::move(field);
            return spec;
          },
          "field"_a, "A copy of this spec reading member `field`.")
      .def("__getstate__",
           [](const FieldSpec& f) {
             return std::make_tuple(f.field, f.kind, f.image, std::string(DTypeName(f.dtype)), f.max_bytes);
           })
      .def("__setstate__", [](FieldSpec& f, const FieldSpecState& t) {
        new (&f) FieldSpec();
        std::string dtype;
        std::tie(f.field, f.kind, f.image, dtype, f.max_bytes) = t;
        f.dtype = ValueOrRaise(ParseDTypeName(dtype));
      });

  nb::enum_<MixLaw>(m, "MixLaw")
      .value("sample", MixLaw::kSample)
      .value("proportion", MixLaw::kProportion)
      .value("stop_at_first", MixLaw::kStopAtFirst)
      .value("counts", MixLaw::kCounts);
  nb::class_<MixOptions>(m, "MixOptions")
      .def(nb::init<>())
      .def_rw("names", &MixOptions::names)
      .def_rw("weights", &MixOptions::weights)
      .def_rw("choose", &MixOptions::choose)
      .def_rw("members", &MixOptions::members)
      .def_rw("key_rules", &MixOptions::key_rules)
      .def_rw("law", &MixOptions::law)
      .def_rw("samples_per_epoch", &MixOptions::samples_per_epoch)
      .def_rw("one_source_per_batch", &MixOptions::one_source_per_batch)
      .def_ro("shards", &MixOptions::shards);

  nb::class_<LoaderOptions>(m, "LoaderOptions")
      .def(nb::init<>())
      .def_rw("tokens", &LoaderOptions::tokens)
      .def_rw("sources", &LoaderOptions::sources)
      .def_rw("fields", &LoaderOptions::fields)
      .def_rw("key_rule", &LoaderOptions::key_rule)
      .def_rw("mix", &LoaderOptions::mix)
      .def_rw("batch_size", &LoaderOptions::batch_size)
      .def_rw("drop_last", &LoaderOptions::drop_last)
      .def_rw("shuffle", &LoaderOptions::shuffle)
      .def_rw("seed", &LoaderOptions::seed)
      .def_rw("shuffle_buffer", &LoaderOptions::shuffle_buffer)
      .def_rw("stream", &LoaderOptions::stream)
      .def_rw("samples_per_epoch", &LoaderOptions::samples_per_epoch)
      .def_rw("shuffle_block", &LoaderOptions::shuffle_block)
      .def_rw("shuffle_window", &LoaderOptions::shuffle_window)
      .def_rw("shuffle_mix", &LoaderOptions::shuffle_mix)
      .def_rw("rank", &LoaderOptions::rank)
      .def_rw("world_size", &LoaderOptions::world_size)
      .def_rw("partition", &LoaderOptions::partition)
      .def_rw("decode_threads", &LoaderOptions::decode_threads)
      .def_rw("io_depth", &LoaderOptions::io_depth)
      .def_rw("coalesce_bytes", &LoaderOptions::coalesce_bytes)
      .def_rw("read_ahead_batches", &LoaderOptions::read_ahead_batches)
      .def_rw("max_read_bytes_per_s", &LoaderOptions::max_read_bytes_per_s)
      .def_rw("prefetch_batches", &LoaderOptions::prefetch_batches)
      .def_rw("timeout_ms", &LoaderOptions::timeout_ms)
      .def_rw("include_keys", &LoaderOptions::include_keys)
      .def_rw("key_column", &LoaderOptions::key_column)
      .def_rw("record_stats", &LoaderOptions::record_stats)
      .def_rw("trace_spans", &LoaderOptions::trace_spans)
      .def_rw("on_error", &LoaderOptions::on_error)
      .def_rw("max_skips", &LoaderOptions::max_skips)
      .def_rw("max_skip_fraction", &LoaderOptions::max_skip_fraction)
      .def_rw("skip_probation", &LoaderOptions::skip_probation)
      .def_rw("max_open_files", &LoaderOptions::max_open_files)
      .def_rw("memory_budget", &LoaderOptions::memory_budget)
      .def_rw("index_cache_bytes", &LoaderOptions::index_cache_bytes)
      .def_rw("storage", &LoaderOptions::storage)
      .def_rw("device", &LoaderOptions::device)
      .def_rw("pin_memory", &LoaderOptions::pin_memory)
      .def_rw("late_copy_ms", &LoaderOptions::late_copy_ms)
      .def_rw("gpu_standin_delay_us", &LoaderOptions::gpu_standin_delay_us)
      .def_rw("gpu_standin_stall_after", &LoaderOptions::gpu_standin_stall_after)
      .def_rw("gpu_standin_watchdog_ms", &LoaderOptions::gpu_standin_watchdog_ms)
      .def_rw("batch_stride", &LoaderOptions::batch_stride)
      .def_rw("batch_offset", &LoaderOptions::batch_offset)
      .def_rw("batch_share", &LoaderOptions::batch_share)
      .def_rw("leave_failed_slots", &LoaderOptions::leave_failed_slots)
      .def_rw("autotune", &LoaderOptions::autotune);

  nb::class_<PlanInfo>(m, "PlanInfo")
      .def_ro("dataset_samples", &PlanInfo::dataset_samples)
      .def_ro("rank_samples", &PlanInfo::rank_samples)
      .def_ro("dropped_samples", &PlanInfo::dropped_samples)
      .def_ro("padded_samples", &PlanInfo::padded_samples)
      .def_ro("batches", &PlanInfo::batches)
      .def_ro("num_shards", &PlanInfo::num_shards)
      .def("__repr__", [](const PlanInfo& p) {
        return "PlanInfo(dataset_samples=" + std::to_string(p.dataset_samples) +
               ", rank_samples=" + std::to_string(p.rank_samples) +
               ", batches=" + std::to_string(p.batches) +
               ", dropped_samples=" + std::to_string(p.dropped_samples) +
               ", padded_samples=" + std::to_string(p.padded_samples) +
               ", num_shards=" + std::to_string(p.num_shards) + ")";
      });

  nb::class_<PendingDelivery>(m, "PendingDelivery")
      .def(
          "deliver",
          [](PendingDelivery& p, uintptr_t stream) {
            if (!p.batch) throw nb::value_error("this batch was delivered already");
            return Delivered(std::move(p.batch), stream);
          },
          "stream"_a = 0, "The batch as NativeLoader.next() returns it; `stream` waits for its copy first.");
  nb::class_<Loader>(m, "NativeLoader")
      .def_static(
          "create",
          [](LoaderOptions options) {
            Result<std::unique_ptr<Loader>> loader = [&] {
              nb::gil_scoped_release release;
              return Loader::Create(std::move(options));
            }();
            return ValueOrRaise(std::move(loader));
          },
          "options"_a)
      .def("set_epoch",
           [](Loader& l, uint64_t epoch) {
             Status st = [&] {
               nb::gil_scoped_release release;
               return l.SetEpoch(epoch);
             }();
             OkOrRaise(st);
           })
      .def(
          "next",
          [](Loader& l, uintptr_t stream) -> nb::object {
             // Waits in slices of 100 ms, checking for signals between them:
             // Ctrl-C raises KeyboardInterrupt promptly, the position is kept.
             while (true) {
               bool waiting = false;
               Result<std::shared_ptr<Batch>> batch = [&] {
                 nb::gil_scoped_release release;
                 return l.NextWithin(100, &waiting);
               }();
               if (waiting) {
                 if (PyErr_CheckSignals() != 0) throw nb::python_error();
                 continue;
               }
               return Delivered(std::move(batch), stream);  // device batches: `stream` waits for the copy
             }
          },
          "stream"_a = 0,
          "The next batch as (index, [(name, array)], keys, urls, [(slot, cause)]), None at the epoch's "
          "end; the last list: slots left for the rank's refills (on_error='skip' with batch_stride). With "
          "device='cuda', `stream` (a cudaStream_t as an integer) is made to wait for its copy. keys are "
          "webdataset's __key__ (tar: the member path without its extension; image folder: the path under "
          "the root; Parquet: the key_column value, else 'file:row'); urls the shard or file each came from.")
      .def(
          "receive",
          [](Loader& l, int64_t index, const std::vector<std::pair<std::string, HostArray>>& arrays,
             std::vector<std::string> keys, std::vector<std::string> urls,
             const std::vector<std::pair<int, std::string>>& failures, uintptr_t stream) -> nb::object {
            ReceivedBatch in = Received(index, arrays, std::move(keys), std::move(urls), failures);
            Result<std::shared_ptr<Batch>> batch = [&] {
              nb::gil_scoped_release release;
              return l.Receive(std::move(in));
            }();
            return Delivered(std::move(batch), stream);
          },
          "index"_a, "arrays"_a, "keys"_a, "urls"_a, "failures"_a, "stream"_a = 0,
          "The rank's batch `index` of this epoch made by another share (its next() item's arrays, keys, "
          "urls and failed slots), finished here: copied into this loader's pool, its failed slots refilled "
          "(on_error='skip'), copied to the device; returned as next() returns a batch.")
      .def(
          "receive_ahead",
          [](Loader& l, int64_t index, const std::vector<std::pair<std::string, HostArray>>& arrays,
             std::vector<std::string> keys, std::vector<std::string> urls,
             const std::vector<std::pair<int, std::string>>& failures) {
            ReceivedBatch in = Received(index, arrays, std::move(keys), std::move(urls), failures);
            Result<std::shared_ptr<Batch>> batch = [&] {
              nb::gil_scoped_release release;
              return l.Receive(std::move(in));
            }();
            return PendingDelivery{ValueOrRaise(std::move(batch))};
          },
          "index"_a, "arrays"_a, "keys"_a, "urls"_a, "failures"_a,
          "receive() without the consumer's wait: the batch with its device copy issued, for deliver(stream) "
          "when its step takes it.")
      .def_prop_ro("plan", [](const Loader& l) { return l.plan(); })
      .def_prop_ro("options", [](const Loader& l) { return l.options(); })  // auto (-1) settings resolved
      .def("stats", [](const Loader& l) { return StatsToPython(l.Stats()); })
      .def("trace_json", &Loader::TraceJson)
      .def("state", &Loader::State)
      .def("restore",
           [](Loader& l, const std::string& state) {
             Status st = [&] {
               nb::gil_scoped_release release;
               return l.Restore(state);
             }();
             OkOrRaise(st);
           })
      .def("stop", &Loader::Stop, nb::call_guard<nb::gil_scoped_release>())
      .def("skips",
           [](const Loader& l) {
             SkipCounts c = l.Skips();
             nb::dict d;
             d["skipped"] = c.skipped;
             d["refilled"] = c.refilled;
             d["seen"] = c.seen;
             return d;
           })
      .def("take_skip_log",
           [](Loader& l) {
             nb::list out;
             for (const SkipRecord& r : l.TakeSkipLog()) {
               nb::dict d;
               d["epoch"] = r.epoch;
               d["batch"] = r.batch;
               d["slot"] = r.slot;
               d["sample"] = r.sample;
               d["key"] = RedactUrls(r.key);
               d["cause"] = RedactUrls(r.cause);
               out.append(d);
             }
             return out;
           })
      .def("open_shard_files", &Loader::OpenShardFiles)
      .def("sources_of", &Loader::SourcesOf, "urls"_a,
           "A mixture: the source each of a batch's urls came from, by name; empty for one dataset.")
      .def("settings",
           [](const Loader& l) {
             LoaderSettings s = l.Settings();
             nb::dict d;
             d["autotune"] = s.autotune;
             d["io_depth"] = s.io_depth;
             d["read_ahead_batches"] = s.read_ahead_batches;
             d["decode_threads"] = s.decode_threads;
             d["prefetch"] = s.prefetch_batches;
             d["cores"] = s.cores;
             d["cores_from"] = s.cores_from;
             if (!s.order.empty()) d["order"] = s.order;
             d["mode"] = s.mode;
             if (s.mode == "stream") {
               nb::dict stream;  // stream=True: the epoch's length and the shuffle buffer (1: stream order)
               stream["samples_per_epoch"] = s.stream_samples_per_epoch;
               stream["shuffle_buffer"] = s.stream_shuffle_buffer;
               stream["why"] = "stream=True: shards read front to back, no index or manifest";
               d["stream"] = stream;
             }
             if (!s.gpu_decoder.empty() || !s.gpu_share_why.empty()) {
               nb::dict gpu;  // decode="auto"/"gpu": the decoder, its share of each batch and why
               gpu["decoder"] = s.gpu_decoder;
               gpu["share"] = s.gpu_share;
               gpu["why"] = s.gpu_share_why;
               d["gpu_decode"] = gpu;
             }
             if (s.index_shards > 0) {
               nb::dict index;  // the shard index tables: held now, their bound (0: none), loads so far
               index["held_bytes"] = s.index_held_bytes;
               index["max_bytes"] = s.index_max_bytes;
               index["loads"] = s.index_loads;
               index["shards"] = s.index_shards;
               index["from"] = s.index_from;
               index["remote_read_whole"] = s.index_remote_read;
               d["index"] = index;
             }
             nb::list upscales;  // image fields that can scale up: images so far, upscaled, the first one's size
             for (const LoaderSettings::Upscale& u : s.upscales) {
               nb::dict e;
               e["field"] = u.field;
               e["images"] = u.images;
               e["upscaled"] = u.upscaled;
               e["first_size"] = nb::make_tuple(u.first_height, u.first_width);  // (H, W), as image() takes sizes
               e["size"] = nb::make_tuple(u.height, u.width);
               upscales.append(e);
             }
             d["image_upscales"] = upscales;
             nb::list fixed;
             for (const std::string& k : s.fixed) fixed.append(k);
             d["fixed"] = fixed;
             return d;
           })
      .def("tune_log", [](const Loader& l) { return ChangesToPython(l.TuneLog()); })
      .def("take_tune_log", [](Loader& l) { return ChangesToPython(l.TakeTuneLog()); });

  m.def(
      "cuda_runtime",
      [](const std::vector<std::string>& search_dirs) {
        cuda::AddCudaSearchDirs(search_dirs);
        Result<const cuda::Runtime*> rt = [&] {
          nb::gil_scoped_release release;
          return cuda::LoadCudaRuntime(/*require_device=*/true);
        }();
        return ValueOrRaise(std::move(rt))->path;
      },
      "search_dirs"_a,
      "Adds directories to the CUDA runtime's search (torch's lib, the nvidia-cuda-runtime wheel's) and "
      "returns the path of the runtime loaded; raises, naming what was looked for, where there is none "
      "or it sees no device.");

  m.def("expand_sources", [](const std::vector<std::string>& sources) {
    return ValueOrRaise(ExpandSources(sources));
  });
}

}  // namespace stoker::python
