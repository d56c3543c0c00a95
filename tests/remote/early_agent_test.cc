// The local agent dlaunch forks from itself before its event loop exists
// (remote/early_agent.h): started, it runs the agent's main with the command
// line and stdin dlaunch-agent would have had; never started, it leaves and
// is reaped. Each case runs in a child of the test process, so that the
// early agent is forked from a single-threaded process, as in dlaunch.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "remote/early_agent.h"

namespace remote = dl::remote;

namespace {
// The agent's main in these tests: writes what it was given to the file its
// first argument names, exits 7.
int fake_agent_main(int argc, char** argv) {
  // Before this opens anything: which descriptors above the control socket it got.
  std::string above;
  for (int fd = 4; fd < 256; ++fd)
    if (::fcntl(fd, F_GETFD) >= 0) above += " " + std::to_string(fd);
  std::ofstream out(argv[1]);
  out << "above 3:" << above << "\n";
  for (int i = 0; i < argc; ++i) out << "argv " << argv[i] << "\n";
  std::string token;
  std::getline(std::cin, token);
  out << "token " << token << "\n";
  struct stat st {};
  out << "fd3 " << (::fstat(3, &st) == 0 && S_ISSOCK(st.st_mode) ? "socket" : "none") << "\n";
  out << "own group " << (::getpgrp() == ::getpid()) << "\n";
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  out << "comm " << name << "\n";
  return 7;
}

// Runs `scenario` in a forked child; returns what it printed to stdout.
template <typename F>
std::string in_child(F scenario) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    scenario();
    std::fflush(nullptr);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st));
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("early agent: started, it runs the agent main with its command line, the token on stdin, the control "
          "socket at fd 3, nothing else of dlaunch's",
          "[remote]") {
  char dir[] = "/tmp/dl-early-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string file = std::string(dir) + "/seen";
  const std::string out = in_child([&] {
    remote::set_in_process_agent(&fake_agent_main);
    // Open in dlaunch without close-on-exec, as a descriptor dlaunch inherited would be.
    (void)::open("/dev/null", O_RDONLY);
    auto early = remote::EarlyAgent::fork_now();
    if (!early) return (void)std::printf("not forked\n");
    std::printf("pid %d\n", early->pid() > 0);
    int control = -1;
    auto agent = early->start({file, "--node", "0", "--control-fd", "3", ""}, "s3cret", &control);
    std::printf("control %d\n", control >= 0);
    int st = 0;
    while (::waitpid(agent.pid, &st, 0) < 0 && errno == EINTR) {}
    std::printf("exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  });
  INFO(out);
  CHECK(out.find("pid 1\n") != std::string::npos);
  CHECK(out.find("control 1\n") != std::string::npos);
  CHECK(out.find("exit 7\n") != std::string::npos);
  const std::string seen = slurp(file);
  INFO(seen);
  CHECK(seen.find("argv dlaunch-agent\nargv " + file + "\nargv --node\nargv 0\nargv --control-fd\nargv 3\nargv \n") != std::string::npos);
  CHECK(seen.find("token s3cret\n") != std::string::npos);
  CHECK(seen.find("fd3 socket\n") != std::string::npos);
  CHECK(seen.find("above 3:\n") != std::string::npos);  // not the command pipe, nor any of the test's
  CHECK(seen.find("own group 1\n") != std::string::npos);
  CHECK(seen.find("comm dlaunch-agent\n") != std::string::npos);
  std::remove(file.c_str());
  ::rmdir(dir);
}

TEST_CASE("early agent: one never started leaves when dropped and is reaped, and none is forked with "
          "DLAUNCH_LOCAL_AGENT=exec or without an agent main",
          "[remote]") {
  const std::string out = in_child([] {
    remote::set_in_process_agent(&fake_agent_main);
    pid_t pid = -1;
    {
      auto early = remote::EarlyAgent::fork_now();
      if (!early) return (void)std::printf("not forked\n");
      pid = early->pid();
    }
    // Reaped by the destructor: no such process, and no child left to wait for.
    std::printf("gone %d\n", ::kill(pid, 0) != 0 && errno == ESRCH);
    std::printf("no child %d\n", ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD);
    ::setenv("DLAUNCH_LOCAL_AGENT", "exec", 1);
    std::printf("exec %d\n", remote::EarlyAgent::fork_now() == nullptr);
    ::unsetenv("DLAUNCH_LOCAL_AGENT");
    remote::set_in_process_agent(nullptr);
    std::printf("unset %d\n", remote::EarlyAgent::fork_now() == nullptr);
  });
  INFO(out);
  CHECK(out.find("gone 1\n") != std::string::npos);
  CHECK(out.find("no child 1\n") != std::string::npos);
  CHECK(out.find("exec 1\n") != std::string::npos);
  CHECK(out.find("unset 1\n") != std::string::npos);
}

TEST_CASE("early agent: one that died before it was started costs dlaunch no SIGPIPE", "[remote]") {
  const std::string out = in_child([] {
    remote::set_in_process_agent(&fake_agent_main);
    auto early = remote::EarlyAgent::fork_now();
    if (!early) return (void)std::printf("not forked\n");
    ::kill(early->pid(), SIGKILL);
    int st = 0;
    ::waitpid(early->pid(), &st, 0);
    int control = -1;
    early->start({"/nonexistent/x"}, "tok", &control);  // writes to pipes nobody reads
    std::printf("alive %d signal %d\n", 1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  });
  INFO(out);
  CHECK(out.find("alive 1 signal 9\n") != std::string::npos);
}

TEST_CASE("early agent: one that ended before it connected is named as forked, with what to do", "[remote]") {
  CHECK(remote::forked_agent_exit_error(3 << 8) ==
        "the local agent (forked from dlaunch) exited with status 3 before it connected (its own message, if any, is "
        "above); to run it as the dlaunch-agent program instead, set DLAUNCH_LOCAL_AGENT=exec");
  CHECK(remote::forked_agent_exit_error(SIGKILL).find("was killed by signal 9") != std::string::npos);
}
