// python/status_binding.h — the one place a stoker::Status becomes a Python
// exception. InvalidArgument -> ValueError; every other code -> stoker.StokerError
// (a RuntimeError) whose message names shard, member, offset and cause, and
// whose `code` attribute is the StatusCode name. URLs in the message are
// redacted (io/url.h): a query's values are credentials as often as not.
#pragma once

#include <nanobind/nanobind.h>

#include "stoker/status.h"

namespace stoker::python {

void RegisterStatus(nanobind::module_& m);
[[noreturn]] void Raise(const Status& status);

template <typename T>
T ValueOrRaise(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}
inline void OkOrRaise(const Status& status) {
  if (!status.ok()) Raise(status);
}

}  // namespace stoker::python
