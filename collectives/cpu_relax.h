#pragma once
// One iteration of a busy-wait on shared memory. Tells the core that this is
// a spin loop: on x86 `pause` stops it from flooding the pipeline with
// speculative loads (and the memory-order flush when the line changes) and
// leaves the sibling hyperthread the issue slots; on aarch64 `yield` is the
// same hint. Elsewhere a plain empty loop is still correct, only hotter.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dl::coll {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

}  // namespace dl::coll
