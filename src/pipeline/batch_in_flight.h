// pipeline/batch_in_flight.h — a batch being made, whatever its order
// source: its pooled buffer, its slots counting down as they are written,
// its failed slots, its images staged for GPU decode, and its copy to the
// device once it is complete.
//
//   run begins it (a lease, or none yet: read ahead) ──▶ readers/decoders
//   write slots, each Finish counts one down (a failure recorded) ──▶ the
//   last: Ready() issues the early device copy on that thread ──▶ the run
//   hands it out in order ──▶ the loader repairs failed slots (its source's
//   rule: refill or repeat), then delivers it (batch_view.h).
//
// Each order source's run adds what only it needs (epoch_run.h's BatchWork:
// its plan and epoch, decode tasks parked before the lease; stream_run.h's
// StreamBatch: the shards the stream left while it filled).
// Thread-safety: pending is atomic; the failures behind error_mu; done is
// guarded by the run's own mutex; lease, keys and urls are written by the
// slot's own thread before it counts the slot done.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/buffer_pool.h"
#include "pipeline/gpu_decode.h"
#include "stoker/status.h"

namespace stoker {

class DeviceCopy;
class DeviceStage;

// A slot whose sample failed. A stream names the sample here (it cannot look
// it up again); the indexed mode finds it from the plan.
struct FailedSlot {
  int slot = 0;
  Status status;        // names shard, member, offset and cause
  int64_t sample = -1;  // stream: its global index (__index__)
  std::string key;      // stream: "shard:key" (InternalKey)
};

struct BatchInFlight {
  virtual ~BatchInFlight() = default;

  int64_t index = 0;  // the run's numbering: within its epoch (indexed), along the stream (stream)
  int size = 0;
  std::unique_ptr<BufferPool::Lease> lease;
  std::vector<std::string> keys;  // per slot, as users see them (pipeline/sample_keys.h); empty: not kept
  std::vector<std::string> urls;  // per slot: the shard or file each came from
  std::atomic<int> pending{0};
  std::mutex error_mu;
  // Every failed slot with its error, in completion order (the skip rules
  // sort them by slot). Guarded by error_mu.
  std::vector<FailedSlot> failures;
  // The lowest failed slot and its error (so the error raised is
  // deterministic). Guarded by error_mu.
  int error_slot = -1;
  Status error;
  bool done = false;  // guarded by the run's mutex
  // GPU decode (pipeline/gpu_decode.h): slots [gpu_from, size) stage their
  // JPEGs here for the device's decoder, decoded after the batch's copy.
  int gpu_from = 0;
  GpuJobs gpu;
  // device runs: the copy to the device, issued when the batch became ready
  // (pipeline/device_stage.h). Declared last: destroyed first, waiting for
  // the copy, before the lease it reads goes back to the pool.
  std::shared_ptr<DeviceCopy> copy;

  // Sets size and the slots whose images go to `gpu` (none without it).
  void Begin(int slots, const GpuDecode* gpu);
  void Fail(FailedSlot failed);
  bool Failed();
  // Counts `n` slots written; true for the call that wrote the last.
  bool CountDown(int n) { return pending.fetch_sub(n) == n; }
  // The batch is complete (on the thread that wrote its last slot): its
  // copy to the device goes out now, so it overlaps the wait for delivery,
  // unless a slot failed (the loader repairs those first, then copies at
  // delivery) or it has no buffer. `device` may be null (host batches).
  void Ready(DeviceStage* device);
};

}  // namespace stoker
