#include "errors/error.h"

#include <cerrno>
#include <cstring>

#include "errors/exit_codes.h"

namespace dl {

void throw_errno(const std::string& what) { throw_errno(what, errno); }

void throw_errno(const std::string& what, int err) {
  throw IoError(what + ": " + std::strerror(err));
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage:
    case ErrorKind::kParse:
      return exit_codes::kUsage;
    case ErrorKind::kTimeout:
      return exit_codes::kTimeout;
    default:
      return exit_codes::kFailure;
  }
}

}  // namespace dl
