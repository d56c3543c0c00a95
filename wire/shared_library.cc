#include "wire/shared_library.h"

#include <dlfcn.h>

namespace dl::wire {

std::string SharedLibrary::why() const {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "; ") + e;
  return out;
}

SharedLibrary open_shared_library(const std::vector<std::string>& candidates, int flags) {
  SharedLibrary lib;
  for (const std::string& c : candidates) {
    if (c.empty()) continue;
    if ((lib.handle = ::dlopen(c.c_str(), flags)) != nullptr) {
      lib.name = c;
      break;
    }
    const char* e = ::dlerror();
    lib.errors.push_back(e ? e : c + ": cannot be loaded");
  }
  return lib;
}

bool shared_library_loaded(const char* soname) {
  void* h = ::dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) ::dlclose(h);
  return h != nullptr;
}

}  // namespace dl::wire
