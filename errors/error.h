#pragma once
// The one error vocabulary of dlaunch. Every error message names what it was
// about (file:line, host, rank, key) and says what to do; the class says which
// kind of failure it is, so callers can map it to an exit code.
#include <stdexcept>
#include <string>

namespace dl {

enum class ErrorKind {
  kUsage,    // bad command line: exit 2, nothing started
  kParse,    // bad input file ("hosts:3:7: ..."): exit 2, nothing started
  kIo,       // a system call or socket failed
  kTimeout,  // a wait ran out; the message says who we waited for
  kRemote,   // a peer (agent, rank, store client) failed or sent garbage
  kAuth,     // a peer failed the job-token handshake
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Shorthands, one per kind.
struct UsageError : Error { explicit UsageError(const std::string& w) : Error(ErrorKind::kUsage, w) {} };
struct ParseError : Error { explicit ParseError(const std::string& w) : Error(ErrorKind::kParse, w) {} };
struct IoError : Error { explicit IoError(const std::string& w) : Error(ErrorKind::kIo, w) {} };
struct TimeoutError : Error { explicit TimeoutError(const std::string& w) : Error(ErrorKind::kTimeout, w) {} };
struct RemoteError : Error { explicit RemoteError(const std::string& w) : Error(ErrorKind::kRemote, w) {} };
struct AuthError : Error { explicit AuthError(const std::string& w) : Error(ErrorKind::kAuth, w) {} };

// "what: strerror(errno)" as an IoError; call right after the failing syscall.
[[noreturn]] void throw_errno(const std::string& what);
// Same, with an explicit errno value.
[[noreturn]] void throw_errno(const std::string& what, int err);

// The exit code dlaunch uses for an error of this kind (exit_codes.h).
int exit_code_for(ErrorKind kind);

}  // namespace dl
