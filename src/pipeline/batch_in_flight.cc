// pipeline/batch_in_flight.cc — see batch_in_flight.h.
#include "pipeline/batch_in_flight.h"

#include <algorithm>

#include "pipeline/device_stage.h"

namespace stoker {

void BatchInFlight::Begin(int slots, const GpuDecode* gpu_decode) {
  size = slots;
  gpu_from = gpu_decode ? size - std::min(size, gpu_decode->GpuSlots(size)) : size;
}

void BatchInFlight::Fail(FailedSlot failed) {
  std::lock_guard lock(error_mu);
  if (error_slot < 0 || failed.slot < error_slot) {
    error_slot = failed.slot;
    error = failed.status;
  }
  failures.push_back(std::move(failed));
}

bool BatchInFlight::Failed() {
  std::lock_guard lock(error_mu);
  return !failures.empty();
}

void BatchInFlight::Ready(DeviceStage* device) {
  if (!device || !lease || Failed()) return;
  copy = device->OnReady(*lease, &gpu);
}

}  // namespace stoker
