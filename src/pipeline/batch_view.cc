// pipeline/batch_view.cc — see batch_view.h.
#include "pipeline/batch_view.h"

#include "pipeline/device_stage.h"

namespace stoker {

BatchView::BatchView(std::unique_ptr<BatchInFlight> work, int64_t index, const BatchLayout& layout,
                     std::vector<SlotFailure> failures)
    : work_(std::move(work)), index_(index), failures_(std::move(failures)) {
  for (const ArraySlot& a : layout.arrays) {
    ArrayView v;
    v.name = a.name;
    v.dtype = a.dtype;
    v.shape.push_back(work_->size);
    v.shape.insert(v.shape.end(), a.sample_shape.begin(), a.sample_shape.end());
    v.data = work_->lease->data() + a.offset;
    v.nbytes = a.sample_bytes * static_cast<size_t>(work_->size);
    arrays_.push_back(std::move(v));
  }
}

Result<std::shared_ptr<Batch>> Deliver(std::unique_ptr<BatchInFlight> work, int64_t index, const BatchLayout& layout,
                                       DeviceStage* device, std::vector<SlotFailure> failures) {
  if (!device || !device->copies()) {
    return std::shared_ptr<Batch>(std::make_shared<BatchView>(std::move(work), index, layout, std::move(failures)));
  }
  std::shared_ptr<DeviceCopy> copy = std::move(work->copy);
  const BufferPool::Lease& lease = *work->lease;  // kept by the view, which the device batch keeps
  GpuJobs* jobs = &work->gpu;
  return device->Deliver(std::make_shared<BatchView>(std::move(work), index, layout, std::move(failures)),
                         std::move(copy), lease, jobs);
}

}  // namespace stoker
