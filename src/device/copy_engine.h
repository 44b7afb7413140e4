// device/copy_engine.h — the seam between the loader and a device: issue a
// batch buffer's copy to device memory, learn when it completed and how long
// it took, make the consumer wait for it without a host sync.
//
// Two implementations:
//  * MakeCudaCopyEngine (cuda_copy_engine.cc): cudaMemcpyAsync from pinned
//    batch buffers on a stream of its own, an event per copy, the consumer's
//    stream made to wait on that event (cudaStreamWaitEvent), timings from
//    CUDA events.
//  * MakeLateCopyEngine (late_copy_engine.cc): for tests on machines with no
//    GPU. "Device memory" is host memory; a copy completes late, on the
//    engine's own thread, in issue order (as a stream does), and checks that
//    the host bytes it copies were not overwritten while it was in flight
//    (checksum at issue against checksum at completion). With it, CI proves
//    the loader's side of the contract: no pool slot reused while its copy is
//    in flight, order unchanged, prompt shutdown with copies in flight,
//    device memory bounded.
//
// Contract for callers: a PendingCopy must be destroyed before the host bytes
// it reads are reused (its destructor waits for the copy), and before the
// device buffer it writes is handed to another copy.
// Thread-safety: CopyEngine methods from any thread; one PendingCopy is used
// by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "stoker/status.h"

namespace stoker {

// A copy's duration, split by who paid for it: `exposed` is the part after
// the consumer needed the batch (its stream, or the CPU engine's caller, had
// to wait), `hidden` the part that overlapped earlier work.
struct CopyTimes {
  double copy_s = 0;
  double exposed_s = 0;
  double hidden_s() const { return copy_s > exposed_s ? copy_s - exposed_s : 0; }
  uint64_t end_ns = 0;  // on observe/clock.h's clock where the engine knows it (CPU engine), else 0
};

// Marks the point of a consumer's stream after which it no longer reads a
// device buffer: a later copy into that buffer waits for it.
class ReleaseFence {
 public:
  virtual ~ReleaseFence() = default;
};

class PendingCopy {
 public:
  // Waits for the copy to complete: the host bytes are free to reuse after.
  virtual ~PendingCopy() = default;
  virtual bool Done() = 0;
  virtual Status Wait() = 0;  // blocks until done; the copy's error, if it failed
  // The batch is needed now on `stream` (a cudaStream_t as an integer; 0:
  // the default stream): the stream waits for the copy, the host does not
  // (the CPU engine, whose consumer is the host, waits). Notes the moment,
  // for the exposed time. Call it before the device bytes are read.
  virtual Status NeededOn(uintptr_t stream) = 0;
  // Once the copy (and, if NeededOn was called, the consumer's mark) is
  // complete: its times; nullopt before.
  virtual std::optional<CopyTimes> Times() = 0;
};

// Work queued on the engine's stream right after a copy and before the copy
// counts as complete (GPU decode writing the batch's images: gpu_decoder.h).
// `stream` is the engine's cudaStream_t as an integer (0 for the CPU engine,
// which runs it on its own thread). Its error is the copy's.
using StreamWork = std::function<Status(uintptr_t stream)>;

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  virtual std::string name() const = 0;
  // The CUDA device ordinal the copies go to; -1 for the CPU engine (its
  // "device" memory is host memory, so batches stay CPU arrays).
  virtual int device() const = 0;

  virtual Result<void*> AllocateDevice(size_t bytes) = 0;
  virtual void FreeDevice(void* p, size_t bytes) = 0;
  // Page-locks host memory (batch buffers) so copies run at full bandwidth
  // and asynchronously; false if refused (the buffer stays pageable).
  virtual bool PinHost(void* p, size_t bytes) = 0;
  virtual void UnpinHost(void* p) = 0;

  // Copies `bytes` from host to device, on the engine's stream, after
  // `after` (the previous user of `device`'s release; may be null), then
  // runs `then` (may be empty) on that stream.
  virtual Result<std::unique_ptr<PendingCopy>> Issue(const void* host, void* device, size_t bytes,
                                                     const std::shared_ptr<ReleaseFence>& after,
                                                     StreamWork then = {}) = 0;
  // The consumer's stream stops reading a device buffer here (null: it did
  // not use one, nothing to wait for).
  virtual std::shared_ptr<ReleaseFence> Released(uintptr_t stream) = 0;
  // Copies whose host bytes changed while in flight (the CPU engine checks;
  // CUDA cannot: 0).
  virtual uint64_t overwrites() const { return 0; }
};

// The CPU engine's settings (tests only).
struct LateCopyOptions {
  int delay_ms = 20;  // each copy completes this long after it was issued (at the earliest)
};
std::shared_ptr<CopyEngine> MakeLateCopyEngine(LateCopyOptions options);

// cudaMemcpyAsync on a non-blocking stream of `device` (the CUDA runtime
// found at run time, device/cuda_runtime.h); FailedPrecondition, saying what
// was looked for, where there is no CUDA.
Result<std::shared_ptr<CopyEngine>> MakeCudaCopyEngine(int device);

}  // namespace stoker
