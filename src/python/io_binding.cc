// python/io_binding.cc — remote I/O settings and counters (io/reader.h):
// set_io_options() overrides the STOKER_IO_* / endpoint environment for the
// process; io_counters() reads the process-wide remote counters.
// Thread-safety: as io/reader.h (options under a mutex, relaxed counters).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "io/reader.h"

namespace nb = nanobind;

namespace stoker::python {

void RegisterIo(nb::module_& m) {
  m.def(
      "set_io_options",
      [](int attempts, int timeout_ms, int backoff_ms, int backoff_max_ms, std::string s3_endpoint,
         std::string cache_dir, uint64_t cache_bytes) {
        IoOptions o;
        o.attempts = attempts;
        o.timeout_ms = timeout_ms;
        o.backoff_ms = backoff_ms;
        o.backoff_max_ms = backoff_max_ms;
        o.s3_endpoint = std::move(s3_endpoint);
        o.cache_dir = std::move(cache_dir);
        if (cache_bytes > 0) o.cache_bytes = cache_bytes;
        SetDefaultIoOptions(o);
      },
      nb::arg("attempts"), nb::arg("timeout_ms"), nb::arg("backoff_ms"), nb::arg("backoff_max_ms"),
      nb::arg("s3_endpoint"), nb::arg("cache_dir") = "", nb::arg("cache_bytes") = 0);
  m.def("io_options", [] {
    const IoOptions& o = DefaultIoOptions();
    nb::dict d;
    d["attempts"] = o.attempts;
    d["timeout_ms"] = o.timeout_ms;
    d["backoff_ms"] = o.backoff_ms;
    d["backoff_max_ms"] = o.backoff_max_ms;
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
    nb::list hist;
    for (auto& b : c.latency_ms_log2) hist.append(b.load());
    d["latency_ms_log2"] = hist;
    return d;
  });
}

}  // namespace stoker::python
