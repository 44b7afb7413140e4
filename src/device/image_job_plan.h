// device/image_job_plan.h — the host side of image_job.h: an image field's
// spec into the kernels' output spec, and a sample's planned geometry
// (codecs/sample_geometry.h) into its job. One place, so the pipeline's
// staging (pipeline/gpu_decode.cc) and the tests that hold the kernels'
// arithmetic to the CPU path's fill them the same way.
// Thread-safety: pure functions.
#pragma once

#include "codecs/sample_geometry.h"
#include "device/image_job.h"
#include "stoker/image_spec.h"

namespace stoker {

// Layout, dtype, filter, and pixel_output.cc's float table: (v / 255 - mean) * inv_std.
GpuOutputSpec OutputSpecOf(const ImageSpec& spec);

// The job for an image of width x height with geometry g; the caller sets
// bytes, length, out_offset, spec and slot.
ImageJob JobOf(const SampleGeometry& g, int width, int height);

}  // namespace stoker
