// python/observe_binding.cc — stoker::BatchMonitor and stage snapshots for Python.
//
// Thin: python/stoker/observe.py times the waits and steps and feeds them
// here; the statistics, slow-batch judgement and causes live in C++
// (observe/batch_monitor.h) so C++ users get the same answers. Every call is
// O(1) or O(window) with no I/O, so none releases the GIL. Snapshots stay C++
// objects (no dict per batch); only the optional JSON-lines log asks for dicts.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/cpu_share.h"
#include "observe/batch_monitor.h"
#include "python/status_binding.h"
#include "stoker/loader.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoker::python {

namespace {

nb::dict EvidenceToPython(const StageEvidence& e) {
  nb::dict d;
  d["window_s"] = e.window_s;
  d["read_util"] = e.ReadUtilisation();
  d["decode_util"] = e.DecodeUtilisation();
  d["decoders_starved"] = e.DecodersStarved();
  d["readers_blocked"] = e.ReadersBlocked();
  d["read_p50_s"] = e.ReadLatencyP50();
  d["read_mb_s"] = e.ReadMBps();
  d["reads"] = e.reads;
  d["decodes"] = e.decodes;
  d["engine_wait_s"] = e.consumer_wait_s;
  d["pool_wait_s"] = e.pool_wait_s;
  const double n = e.requests > 0 ? e.requests : 1;
  d["ready_at_request"] = e.batches_ready / n;
  d["reads_in_flight"] = e.reads_in_flight / n;
  d["decodes_in_flight"] = e.decodes_in_flight / n;
  d["decode_queue_depth"] = e.decode_queue_depth / n;
  d["io_depth"] = e.io_depth;
  d["decode_threads"] = e.decode_threads;
  d["remote_requests"] = e.remote_requests;
  d["remote_retries"] = e.remote_retries;
  d["remote_throttled"] = e.remote_throttled;
  d["remote_failures"] = e.remote_failures;
  d["remote_p50_ms"] = e.RemoteLatencyMs(0.5);
  d["cache_hits"] = e.cache_hits;
  d["cache_misses"] = e.cache_misses;
  return d;
}

nb::object SlowToPython(const std::optional<SlowBatch>& slow) {
  if (!slow) return nb::none();
  nb::dict d;
  d["batch"] = slow->batch;
  d["wait_s"] = slow->wait_s;
  d["median_s"] = slow->median_s;
  d["threshold_s"] = slow->threshold_s;
  d["fast_before"] = slow->fast_before;
  d["cause"] = SlowCauseName(slow->diagnosis.cause);
  d["detail"] = slow->diagnosis.detail;
  d["line"] = slow->Line();
  return d;
}

nb::dict StatsToPython(const WindowStats& s) {
  nb::dict d;
  d["batches"] = s.batches;
  d["wait_mean_s"] = s.wait.mean;
  d["wait_std_s"] = s.wait.std;
  d["wait_min_s"] = s.wait.min;
  d["wait_p50_s"] = s.wait.p50;
  d["wait_p95_s"] = s.wait.p95;
  d["wait_p99_s"] = s.wait.p99;
  d["wait_max_s"] = s.wait.max;
  d["h2d_mean_s"] = s.mean_h2d_s;
  d["compute_mean_s"] = s.mean_compute_s;
  d["efficiency"] = s.efficiency;
  d["keeps_up"] = s.keeps_up;
  d["slow_batches"] = s.slow_batches;
  return d;
}

nb::dict TotalsToPython(const Totals& t) {
  nb::dict d;
  d["batches"] = t.batches;
  d["slow_batches"] = t.slow_batches;
  d["wait_s"] = t.wait_s;
  d["h2d_s"] = t.h2d_s;
  d["compute_s"] = t.compute_s;
  d["efficiency"] = t.efficiency;
  return d;
}

nb::dict VerdictToPython(const Verdict& v) {
  nb::dict d;
  d["bottleneck"] = BottleneckName(v.bottleneck);
  d["healthy"] = v.healthy;
  d["keeps_up"] = v.keeps_up;
  d["efficiency"] = v.efficiency;
  d["reason"] = v.reason;
  d["recommendation"] = v.recommendation;
  return d;
}

}  // namespace

void RegisterObserve(nb::module_& m) {
  // Opaque: the observer only diffs two of them (loader.stats() gives a dict).
  nb::class_<RecorderSnapshot>(m, "RecorderSnapshot")
      .def_ro("time_s", &RecorderSnapshot::time_s)
      .def_ro("h2d_exposed_s", &RecorderSnapshot::h2d_exposed_s);  // the consumer's share of device copies
  m.def("stage_snapshot", [](const Loader& l) { return l.Stats(); }, "loader"_a,
        "The loader's stage counters and gauges now, as an opaque snapshot.");
  m.def(
      "cpu_share",
      [] {
        const CpuShare c = CurrentCpuShare();
        nb::dict d;
        d["cores"] = c.cores;
        d["affinity"] = c.affinity;
        d["quota"] = c.quota;
        d["local_ranks"] = c.local_ranks;
        d["pinned"] = c.pinned;
        d["cores_from"] = c.ToString();
        return d;
      },
      "The CPUs this process may use (core/cpu_share.h): cores, affinity, quota (0: none), local_ranks, "
      "pinned, and cores_from, the line that says where the number came from.");
  m.def(
      "stage_evidence",
      [](const RecorderSnapshot& before, const RecorderSnapshot& after) {
        return EvidenceToPython(StageEvidence::Between(before, after));
      },
      "before"_a, "after"_a, "Utilisation and gauges between two snapshots, as a dict.");

  nb::class_<BatchMonitor>(m, "BatchMonitor")
      .def(
          "__init__",
          [](BatchMonitor* self, int window, double slow_factor, double slow_floor_s, int min_history,
             double healthy_efficiency, double busy_threshold, std::vector<std::string> source_names) {
            MonitorOptions o;
            o.source_names = std::move(source_names);
            o.window = window;
            o.slow_factor = slow_factor;
            o.slow_floor_s = slow_floor_s;
            o.min_history = min_history;
            o.healthy_efficiency = healthy_efficiency;
            o.busy_threshold = busy_threshold;
            new (self) BatchMonitor(ValueOrRaise(BatchMonitor::Create(o)));
          },
          "window"_a = 50, "slow_factor"_a = 5.0, "slow_floor_s"_a = 0.05, "min_history"_a = 5,
          "healthy_efficiency"_a = 0.9, "busy_threshold"_a = 0.7, "source_names"_a = std::vector<std::string>{})
      .def("on_wait", [](BatchMonitor& mon, double wait_s) { return SlowToPython(mon.OnWait(wait_s)); }, "wait_s"_a)
      .def(
          "on_wait",
          [](BatchMonitor& mon, double wait_s, const RecorderSnapshot& before, const RecorderSnapshot& after) {
            const StageEvidence e = StageEvidence::Between(before, after);
            return SlowToPython(mon.OnWait(wait_s, &e));
          },
          "wait_s"_a, "before"_a, "after"_a)
      .def("on_h2d", &BatchMonitor::OnH2D, "seconds"_a)
      .def("on_compute", &BatchMonitor::OnCompute, "seconds"_a)
      .def("stats", [](const BatchMonitor& mon) { return StatsToPython(mon.Stats()); })
      .def("totals", [](const BatchMonitor& mon) { return TotalsToPython(mon.totals()); })
      .def("diagnose", [](const BatchMonitor& mon) { return VerdictToPython(mon.Diagnose()); })
      .def("summary_line", &BatchMonitor::SummaryLine)
      .def("latest",
           [](const BatchMonitor& mon) -> nb::object {
             const BatchMonitor::Record* r = mon.Latest();
             if (r == nullptr) return nb::none();
             nb::dict d;
             d["batch"] = r->batch;
             d["wait_s"] = r->wait_s;
             d["h2d_s"] = r->h2d_s;
             d["compute_s"] = r->compute_s;
             d["slow"] = r->slow;
             d["stages"] = r->has_evidence ? nb::object(EvidenceToPython(r->evidence)) : nb::none();
             return d;
           })
      .def_prop_ro("window", [](const BatchMonitor& mon) { return mon.options().window; })
      .def_prop_ro("batches", [](const BatchMonitor& mon) { return mon.totals().batches; });
}

}  // namespace stoker::python
