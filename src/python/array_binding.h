// python/array_binding.h — zero-copy numpy views into pooled memory.
//
// `owner` keeps the memory alive: the returned array's base is a capsule that
// holds it, so a buffer goes back to its pool only when the last array (or
// torch tensor made by torch.from_numpy) that views it is gone. A view of
// device memory (ArrayView::device >= 0) is a torch CUDA tensor instead.
#pragma once

#include <memory>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "stoker/loader.h"

namespace stoker::python {

nanobind::dlpack::dtype ToDlpack(DType dtype);
nanobind::object ArrayView(const stoker::ArrayView& view, std::shared_ptr<void> owner);

}  // namespace stoker::python
