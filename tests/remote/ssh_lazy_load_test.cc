// The other half of tests/integration/lazy_libssh_test.cc: code that links
// dl_ssh has no libssh mapped until it calls into libssh, and has it after
// (remote/ssh/libssh_loader.h). Needs no cluster: the session fails on a
// closed local port, after libssh was loaded for it.
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "remote/ssh/libssh_loader.h"
#include "remote/ssh/session.h"

namespace {
bool mapped(const std::string& lib) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream ss;
  ss << maps.rdbuf();
  return ss.str().find(lib) != std::string::npos;
}
}  // namespace

TEST_CASE("libssh is mapped only once an ssh session is started", "[remote][ssh]") {
  // In a child, so that no earlier test in this process has loaded it.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    if (mapped("libssh.so") || dl::ssh::libssh_loaded()) code |= 1;
    try {
      dl::ssh::Options o;
      o.connect_timeout = std::chrono::milliseconds(2000);
      o.use_agent = false;
      o.ssh_dir = "/nonexistent-dlaunch-test";
      dl::ssh::Session s(dl::ssh::Target{"127.0.0.1", "nobody", 1}, o);  // port 1: refused
      code |= 4;
    } catch (const dl::Error&) {
    }
    if (!mapped("libssh.so") || !dl::ssh::libssh_loaded()) code |= 2;
    ::_exit(code);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFEXITED(st));
  INFO("bit 1: libssh mapped before any ssh call; bit 2: not mapped after one; bit 4: the session connected");
  CHECK(WEXITSTATUS(st) == 0);
}
