// io/fault_guard.cc — see fault_guard.h.
#include "io/fault_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace stoker {

namespace {

// The copy this thread is inside, if any; initial-exec so that reading it in
// the handler is a plain load from the thread pointer (no __tls_get_addr).
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* tls_jump = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local uintptr_t tls_fault = 0;

std::mutex install_mu;     // serialises installs; the handler reads `previous` without it
struct sigaction previous;  // what was installed before us (chained to)

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = tls_jump) {
    tls_jump = nullptr;
    tls_fault = reinterpret_cast<uintptr_t>(info->si_addr);
    siglongjmp(*jump, 1);
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

bool CopyGuarded(void* dst, const void* src, size_t n, uintptr_t* fault_at) {
  sigjmp_buf jump;
  // savemask 0: SA_NODEFER left SIGBUS unblocked in the handler, so the mask
  // after the jump is the mask before it.
  if (sigsetjmp(jump, 0) != 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    *fault_at = tls_fault;
    return false;
  }
  tls_jump = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the copy stays inside the guard
  std::memcpy(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tls_jump = nullptr;
  return true;
}

}  // namespace stoker
