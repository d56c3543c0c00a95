#pragma once
// Loading a shared library when it is first needed (dlopen), for the
// libraries dlaunch links none of: libssh, libpmix and hwloc, the CUDA
// runtime and NCCL, the CUDA driver. Each caller keeps its own flags (why
// RTLD_GLOBAL or RTLD_LAZY is its own reason), its own once-only caching and
// its own message saying what to install.
#include <string>
#include <vector>

namespace dl::wire {

struct SharedLibrary {
  void* handle = nullptr;           // dlopen's; nullptr when no candidate loaded
  std::string name;                 // the candidate that loaded
  std::vector<std::string> errors;  // the loader's message for each candidate that did not, in order
  // The messages joined with "; " ("" when there are none).
  std::string why() const;
};

// dlopen(candidate, flags) for each of `candidates` in order (a SONAME for
// ld.so's cache and paths, then full paths; empty ones skipped) until one
// loads. The library stays open: nothing here closes it.
SharedLibrary open_shared_library(const std::vector<std::string>& candidates, int flags);

// True when `soname` is already mapped into this process (RTLD_NOLOAD:
// loads nothing).
bool shared_library_loaded(const char* soname);

}  // namespace dl::wire
