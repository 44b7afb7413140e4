#include "python/status_binding.h"

#include "io/url.h"

namespace nb = nanobind;

namespace stoker::python {

namespace {
PyObject* g_stoker_error = nullptr;
}

void RegisterStatus(nb::module_& m) {
  g_stoker_error = PyErr_NewExceptionWithDoc(
      "stoker.StokerError", "A stoker failure: the message names shard, member, byte offset and cause.",
      PyExc_RuntimeError, nullptr);
  m.attr("StokerError") = nb::handle(g_stoker_error);
}

void Raise(const Status& status) {
  // A URL's query may hold a credential (a presigned signature, a token).
  const std::string message = RedactUrls(status.message());
  if (status.code() == StatusCode::kInvalidArgument) throw nb::value_error(message.c_str());
  nb::gil_scoped_acquire gil;  // callers may have released it
  nb::object err = nb::steal(PyObject_CallFunction(g_stoker_error, "s", message.c_str()));
  if (err.is_valid()) nb::setattr(err, "code", nb::str(StatusCodeName(status.code())));
  PyErr_SetObject(g_stoker_error, err.ptr());
  throw nb::python_error();
}

}  // namespace stoker::python
