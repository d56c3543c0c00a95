#pragma once
// Threads that take no process-directed signal. A new thread inherits its
// creator's signal mask, and the kernel gives a process-directed signal (a
// child's SIGCHLD, the user's SIGINT) to any thread that does not block it:
// a helper sleeping in poll or on a condition would be woken for a signal
// only the process's own loop handles. In the agent that was a sleeping
// thread woken, on a CPU busy starting ranks, for each of a launch's
// SIGCHLDs (docs/benchmarks.md, "Measurements behind the design").
#include <pthread.h>
#include <signal.h>

#include <initializer_list>
#include <thread>
#include <utility>

namespace dl::wire {

// Starts `body` on a new thread with every signal blocked but those in
// `except`; the calling thread's mask is as it was on return. Throws
// std::system_error, as std::thread does, when no thread can be had.
template <class F>
std::thread quiet_thread(F&& body, std::initializer_list<int> except = {}) {
  sigset_t mask, old;
  sigfillset(&mask);
  for (int sig : except) sigdelset(&mask, sig);
  ::pthread_sigmask(SIG_SETMASK, &mask, &old);
  struct Restore {
    const sigset_t* old;
    ~Restore() { ::pthread_sigmask(SIG_SETMASK, old, nullptr); }
  } restore{&old};
  return std::thread(std::forward<F>(body));
}

}  // namespace dl::wire
