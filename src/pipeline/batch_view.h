// pipeline/batch_view.h — a batch as the consumer gets it, whatever its
// order source: the arrays of its pooled buffer as views (collate costs
// nothing), its keys and urls, and where the device stage copies, the same
// views over its device copy.
//
// The view owns the batch in flight (batch_in_flight.h), so the pool lease
// goes back when the consumer releases the batch (a device batch holds the
// host view until its copy is done: device_stage.h).
// Thread-safety: immutable once made; released on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/batch_in_flight.h"
#include "pipeline/batch_layout.h"
#include "stoker/loader.h"

namespace stoker {

class DeviceStage;

class BatchView : public Batch {
 public:
  // `index`: the batch's number within its epoch, as the consumer counts;
  // `failures`: slots left unfilled for the rank's refills (Batch::failures).
  BatchView(std::unique_ptr<BatchInFlight> work, int64_t index, const BatchLayout& layout,
            std::vector<SlotFailure> failures = {});
  int64_t index() const override { return index_; }
  int size() const override { return work_->size; }
  const std::vector<ArrayView>& arrays() const override { return arrays_; }
  const std::vector<std::string>& keys() const override { return work_->keys; }
  const std::vector<std::string>& urls() const override { return work_->urls; }
  const std::vector<SlotFailure>& failures() const override { return failures_; }

 private:
  std::unique_ptr<BatchInFlight> work_;
  int64_t index_;
  std::vector<ArrayView> arrays_;
  std::vector<SlotFailure> failures_;
};

// The consumer's batch, its failed slots repaired (or left, `failures`): a
// view of its host buffer, or where `device` copies (may be null), of its
// device copy, issued when the batch became ready (BatchInFlight::Ready) or
// now (a repaired or received batch).
Result<std::shared_ptr<Batch>> Deliver(std::unique_ptr<BatchInFlight> work, int64_t index, const BatchLayout& layout,
                                       DeviceStage* device, std::vector<SlotFailure> failures = {});

}  // namespace stoker
