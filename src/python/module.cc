// python/module.cc — the `stoker._stoker` extension: one register call per area.
#include <nanobind/nanobind.h>

#include "python/status_binding.h"

namespace stoker::python {
void RegisterLoader(nanobind::module_& m);
void RegisterCodecs(nanobind::module_& m);
void RegisterObserve(nanobind::module_& m);
void RegisterTokens(nanobind::module_& m);
void RegisterIo(nanobind::module_& m);
void RegisterMap(nanobind::module_& m);
}  // namespace stoker::python

NB_MODULE(_stoker, m) {
  m.doc() = "stoker's native engine; use the `stoker` package, not this module.";
  stoker::python::RegisterStatus(m);
  stoker::python::RegisterLoader(m);
  stoker::python::RegisterCodecs(m);
  stoker::python::RegisterObserve(m);
  stoker::python::RegisterTokens(m);
  stoker::python::RegisterIo(m);
  stoker::python::RegisterMap(m);
  // python/stoker/_exit.py turns them off only when a daemon thread still
  // holds a loader at exit (its frames are never unwound, so never freed).
  m.def("set_leak_warnings", &nanobind::set_leak_warnings, nanobind::arg("enabled"));
}
