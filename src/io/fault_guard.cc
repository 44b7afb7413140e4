// io/fault_guard.cc — see fault_guard.h.
#include "io/fault_guard.h"

#include "core/stream_copy.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace stoker {

namespace {

// The copies in progress, one slot per thread that ever made one (claimed on
// its first copy, given back when it exits). Not thread_local: the handler
// must find its thread's slot without touching TLS, which in a dlopen'd
// module may allocate on first use (and initial-exec TLS there exhausts the
// static TLS block). The handler scans for pthread_self(), a load from the
// thread pointer.
constexpr int kSlots = 1024;
struct Slot {
  std::atomic<pthread_t> owner{};            // 0: free
  std::atomic<sigjmp_buf*> jump{nullptr};   // set while its owner copies
  std::atomic<uintptr_t> fault{0};          // the faulting address, for the jump's landing
};
Slot slots[kSlots];

struct ThreadSlot {
  Slot* slot = nullptr;
  bool tried = false;
  ~ThreadSlot() {
    if (slot != nullptr) slot->owner.store(pthread_t{}, std::memory_order_release);
  }
  __attribute__((noinline)) Slot* Get() {
    if (!tried) {
      tried = true;
      const pthread_t self = pthread_self();
      for (Slot& s : slots) {
        pthread_t free{};
        if (s.owner.compare_exchange_strong(free, self, std::memory_order_acq_rel)) {
          slot = &s;
          break;
        }
      }
    }
    return slot;
  }
};
thread_local ThreadSlot thread_slot;

std::mutex install_mu;      // serialises installs; the handler reads `previous` without it
struct sigaction previous;  // what was installed before us (chained to)

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const pthread_t self = pthread_self();
  for (Slot& s : slots) {
    if (!pthread_equal(s.owner.load(std::memory_order_relaxed), self)) continue;
    if (sigjmp_buf* jump = s.jump.load(std::memory_order_relaxed)) {
      s.jump.store(nullptr, std::memory_order_relaxed);
      s.fault.store(reinterpret_cast<uintptr_t>(info->si_addr), std::memory_order_relaxed);
      siglongjmp(*jump, 1);
    }
    // No break: after a fork, a slot of a parent's thread may carry the same
    // pthread_t as a child's thread; only the one with a jump set is ours.
  }
  // Not ours: whoever handled SIGBUS before us, or the default action.
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != nullptr) {
      previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
    previous.sa_handler(sig);
    return;
  }
  // Default action: restore it; returning re-executes the faulting access,
  // which now terminates the process as if we had never been here.
  signal(SIGBUS, SIG_DFL);
}

}  // namespace

void InstallFaultGuard() {
  std::lock_guard lock(install_mu);
  struct sigaction now {};
  if (sigaction(SIGBUS, nullptr, &now) != 0) return;
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == &OnSigbus) return;
  struct sigaction mine {};
  mine.sa_sigaction = &OnSigbus;
  mine.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&mine.sa_mask);
  struct sigaction before {};
  if (sigaction(SIGBUS, &mine, &before) == 0) previous = before;
}

GuardedCopy CopyGuarded(void* dst, const void* src, size_t n, uintptr_t* fault_at, bool streaming) {
  Slot* volatile slot = thread_slot.Get();  // volatile: read again after the jump
  if (slot == nullptr) return GuardedCopy::kUnguarded;  // more threads than slots: the caller preads
  sigjmp_buf jump;
  // savemask 0: SA_NODEFER left SIGBUS unblocked in the handler, so the mask
  // after the jump is the mask before it.
  if (sigsetjmp(jump, 0) != 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // A runtime that wraps handlers (ThreadSanitizer's does) may have blocked
    // SIGBUS around ours despite SA_NODEFER; blocked, the next fault would
    // kill the process. Only here, on the rare fault path: no syscall per copy.
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
    *fault_at = slot->fault.load(std::memory_order_relaxed);
    return GuardedCopy::kFaulted;
  }
  slot->jump.store(&jump, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the copy stays inside the guard
  if (streaming) {
    StreamCopy(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot->jump.store(nullptr, std::memory_order_relaxed);
  return GuardedCopy::kCopied;
}

}  // namespace stoker
