// io/fault_guard.h — a memcpy out of a file mapping that reports a vanished
// page instead of killing the process.
//
// Reading a mapped file past its end raises SIGBUS: the file was truncated (or
// a network file system lost it) after it was mapped. A pread would have
// returned a short count; a plain memcpy would take the whole process down. A
// guarded copy turns the fault into a `false` return (and the faulting address)
// for its caller to report as DataLoss naming the file and offset.
//
// How: one process-wide SIGBUS handler (installed on first use, re-installed if
// someone replaced it since, e.g. Python's faulthandler) siglongjmps back into
// the copy only when the faulting thread is inside a guarded copy (found in a
// fixed table of per-thread slots by pthread_self(), no TLS in the handler);
// any other SIGBUS goes on to the handler that was there before, or to the
// default action (the process dies as it would have without us). The handler
// runs with SA_NODEFER, so the jump needs no signal-mask restore and the copy
// no sigprocmask syscall.
// Thread-safety: CopyGuarded from any thread; InstallFaultGuard from any thread
// (serialised inside).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoker {

// Makes sure our SIGBUS handler is the installed one (cheap when it is).
void InstallFaultGuard();

enum class GuardedCopy {
  kCopied,
  kFaulted,    // *fault_at = the faulting address; dst holds an unspecified part of the bytes
  kUnguarded,  // nothing copied: this thread has no guard slot (over 1024 threads copy); use pread
};

// memcpy(dst, src, n) (StreamCopy when `streaming`: core/stream_copy.h),
// except that a SIGBUS while reading src is reported, not fatal.
// InstallFaultGuard must have run (FileMapping::Map does it when it maps).
GuardedCopy CopyGuarded(void* dst, const void* src, size_t n, uintptr_t* fault_at, bool streaming = false);

}  // namespace stoker
