// python/io_binding.cc — remote I/O settings and counters (io/reader.h):
// StorageOptions (each loader's own), default_storage_options() (what a
// loader starts from), set_io_options() (overrides those defaults for the
// process: tests, notebooks); io_counters() reads the process-wide counters,
// the outage gauges included.
// Thread-safety: as io/reader.h (options under a mutex, relaxed counters).
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "io/reader.h"
#include "io/url.h"

namespace nb = nanobind;

namespace stoker::python {

void RegisterIo(nb::module_& m) {
  nb::class_<StorageOptions>(m, "StorageOptions")
      .def(nb::init<>())
      .def_rw("s3_endpoint", &StorageOptions::s3_endpoint)
      .def_rw("profile", &StorageOptions::profile)
      .def_rw("region", &StorageOptions::region)
      .def_rw("retry_deadline_ms", &StorageOptions::retry_deadline_ms)
      .def_rw("attempts", &StorageOptions::attempts)
      .def_rw("timeout_ms", &StorageOptions::timeout_ms)
      .def_rw("stall_ms", &StorageOptions::stall_ms)
      .def_rw("backoff_ms", &StorageOptions::backoff_ms)
      .def_rw("backoff_max_ms", &StorageOptions::backoff_max_ms)
      .def_rw("cache_dir", &StorageOptions::cache_dir)
      .def_rw("cache_bytes", &StorageOptions::cache_bytes)
      .def_rw("http_headers", &StorageOptions::http_headers)
      .def_rw("hf_endpoint", &StorageOptions::hf_endpoint)
      .def_rw("hf_token", &StorageOptions::hf_token);
  // A URL as it may be shown: query values and passwords replaced by "…" (io/url.h).
  m.def("redact_urls", [](const std::string& text) { return RedactUrls(text); }, nb::arg("text"));
  // The defaults a loader starts from: the environment now, unless
  // set_io_options overrode them for the process.
  m.def("default_storage_options", [] { return DefaultIoOptions(); });
  // Overrides the given process defaults (the rest keep their values).
  m.def(
      "set_io_options",
      [](std::optional<int> attempts, std::optional<int> timeout_ms, std::optional<int> backoff_ms,
         std::optional<int> backoff_max_ms, std::optional<std::string> s3_endpoint,
         std::optional<std::string> cache_dir, std::optional<uint64_t> cache_bytes,
         std::optional<double> retry_deadline_s, std::optional<int> stall_ms) {
        IoOptions o = DefaultIoOptions();
        if (attempts) o.attempts = *attempts;
        if (timeout_ms) o.timeout_ms = *timeout_ms;
        if (backoff_ms) o.backoff_ms = *backoff_ms;
        if (backoff_max_ms) o.backoff_max_ms = *backoff_max_ms;
        if (s3_endpoint) o.s3_endpoint = *s3_endpoint;
        if (cache_dir) o.cache_dir = *cache_dir;
        if (cache_bytes) o.cache_bytes = *cache_bytes > 0 ? *cache_bytes : StorageOptions{}.cache_bytes;  // 0: default
        if (retry_deadline_s) o.retry_deadline_ms = static_cast<int>(*retry_deadline_s * 1000);
        if (stall_ms) o.stall_ms = *stall_ms;
        SetDefaultIoOptions(o);
      },
      nb::kw_only(), nb::arg("attempts") = nb::none(), nb::arg("timeout_ms") = nb::none(),
      nb::arg("backoff_ms") = nb::none(), nb::arg("backoff_max_ms") = nb::none(),
      nb::arg("s3_endpoint") = nb::none(), nb::arg("cache_dir") = nb::none(), nb::arg("cache_bytes") = nb::none(),
      nb::arg("retry_deadline_s") = nb::none(), nb::arg("stall_ms") = nb::none());
  m.def("reset_io_options", &ResetDefaultIoOptions,
        "Forgets set_io_options: later loaders start from the environment again.");
  m.def("io_options", [] {
    const IoOptions o = DefaultIoOptions();
    nb::dict d;
    d["attempts"] = o.attempts;
    d["timeout_ms"] = o.timeout_ms;
    d["backoff_ms"] = o.backoff_ms;
    d["backoff_max_ms"] = o.backoff_max_ms;
    d["retry_deadline_s"] = o.retry_deadline_ms / 1000.0;
    d["stall_ms"] = o.stall_ms;
    d["s3_endpoint"] = o.s3_endpoint;
    d["cache_dir"] = o.cache_dir;
    d["cache_bytes"] = o.cache_bytes;
    return d;
  });
  m.def("io_counters", [] {
    IoCounters& c = GlobalIoCounters();
    nb::dict d;
    d["requests"] = c.requests.load();
    d["retries"] = c.retries.load();
    d["bytes"] = c.bytes.load();
    d["throttled"] = c.throttled.load();
    d["failures"] = c.failures.load();
    d["cache_hits"] = c.cache_hits.load();
    d["cache_misses"] = c.cache_misses.load();
    d["cache_corrupt"] = c.cache_corrupt.load();
    d["cache_evictions"] = c.cache_evictions.load();
    d["latency_s"] = static_cast<double>(c.latency_ns.load()) / 1e9;
    d["retrying"] = c.retrying.load();
    d["outage_s"] = c.OutageSeconds();
    d["last_fault"] = c.LastFault();
    nb::list hist;
    for (auto& b : c.latency_ms_log2) hist.append(b.load());
    d["latency_ms_log2"] = hist;
    return d;
  });
}

}  // namespace stoker::python
