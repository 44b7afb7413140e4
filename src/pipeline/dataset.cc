// pipeline/dataset.cc — see dataset.h.
#include "pipeline/dataset.h"

#include "pipeline/device_stage.h"
#include "pipeline/gpu_decode.h"

namespace stoker {

Status AddGpuDecode(const LoaderOptions& options, EngineData* data) {
  STOKER_ASSIGN_OR_RETURN(data->gpu, GpuDecode::Create(options, data->layout, &data->gpu_why_not));
  if (data->gpu && data->device) data->device->SetGpu(data->gpu);
  return Status::Ok();
}

std::shared_ptr<BufferPool> MakeBatchPool(const EngineData& data) {
  const size_t batches = static_cast<size_t>(data.tune_max[Knob::kPrefetch]) + 1;
  // Device buffers for as many batches as the pool may lend (device_stage.h).
  if (data.device) data.device->KeepBuffers(batches);
  return BufferPool::Create(data.layout.buffer_bytes, batches, data.device ? data.device->page_locker() : nullptr);
}

}  // namespace stoker
