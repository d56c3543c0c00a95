// The agent's stack tools: which tool a PATH offers, how a refused attach is
// explained, and the Python hook run by a real /usr/bin/python3.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/stack_tools.h"

using namespace dl::agent;
namespace fs = std::filesystem;

namespace {
struct Tmp {
  Tmp() {
    char t[] = "/tmp/dl-stack-test-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~Tmp() { fs::remove_all(path); }
  std::string path;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}
}  // namespace

TEST_CASE("stack tools: eu-stack first, then gdb, none in an empty PATH", "[agent]") {
  Tmp t;
  CHECK(find_stack_tool(t.path).name.empty());
  fs::create_symlink("/usr/bin/gdb", t.path + "/gdb");
  StackTool gdb = find_stack_tool(t.path);
  CHECK(gdb.name == "gdb");
  CHECK(gdb.path == t.path + "/gdb");
  CHECK(tool_argv(gdb, 42) == std::vector<std::string>{gdb.path, "-nx", "-batch", "-p", "42", "-ex", "thread apply all bt"});
  fs::create_symlink("/usr/bin/eu-stack", t.path + "/eu-stack");
  CHECK(find_stack_tool(t.path).name == "eu-stack");
  CHECK(tool_argv(find_stack_tool(t.path), 7).back() == "7");
}

TEST_CASE("stack tools: a refused attach names ptrace and ptrace_scope, with the fix", "[agent]") {
  StackTool eu{"eu-stack", "/usr/bin/eu-stack"};
  StackTool gdb{"gdb", "/usr/bin/gdb"};
  const std::string denied = tool_failure(eu, 12, "eu-stack: dwfl_linux_proc_report pid 12: Permission denied\n", 2);
  CHECK(denied.find("eu-stack could not read pid 12") != std::string::npos);
  CHECK(denied.find("kernel.yama.ptrace_scope = 2") != std::string::npos);
  CHECK(denied.find("set kernel.yama.ptrace_scope to 1") != std::string::npos);
  const std::string no_yama = tool_failure(gdb, 12, "ptrace: Operation not permitted.\n", -1);
  CHECK(no_yama.find("refused") != std::string::npos);
  CHECK(no_yama.find("ptrace_scope") == std::string::npos);
  CHECK(no_yama.find("SYS_PTRACE") != std::string::npos);
  CHECK(tool_failure(gdb, 12, "#0  main () at a.c:3\n", -1).empty());
  CHECK(tool_failure(gdb, 12, "No such process.\n", -1) == "gdb could not read pid 12: No such process.");
}

TEST_CASE("stack hook: SIGQUIT dumps every thread to the file, the process goes on, the shadowed sitecustomize runs",
          "[agent]") {
  REQUIRE(::access("/usr/bin/python3", X_OK) == 0);  // Debian's python3, a test dependency
  Tmp hook, user;
  { std::ofstream(hook.path + "/sitecustomize.py") << python_dump_hook(); }
  { std::ofstream(user.path + "/sitecustomize.py") << "import sys\nsys.stdout.write('user sitecustomize ran\\n')\n"; }
  const std::string script =
      "import os, signal, sys, threading, time\n"
      "def waiter():\n    time.sleep(30)\n"
      "threading.Thread(target=waiter, daemon=True).start()\n"
      "def deep_in_here():\n    os.kill(os.getpid(), signal.SIGQUIT)\n    time.sleep(0.2)\n"
      "deep_in_here()\n"
      "print('alive', os.getpid(), any(p == sys.argv[1] for p in sys.path))\n";
  { std::ofstream(user.path + "/s.py") << script; }
  const std::string out = run_capture("PYTHONPATH=" + hook.path + ":" + user.path + " /usr/bin/python3 " + user.path +
                                      "/s.py " + hook.path + " 2>&1");
  INFO(out);
  CHECK(out.find("user sitecustomize ran\n") != std::string::npos);
  // It survived SIGQUIT, and the hook's directory left sys.path.
  REQUIRE(out.find("alive ") != std::string::npos);
  CHECK(out.find(" False\n") != std::string::npos);
  const std::string pid = out.substr(out.find("alive ") + 6, out.find(' ', out.find("alive ") + 6) - out.find("alive ") - 6);
  const std::string dump = slurp(hook.path + "/py." + pid + ".stack");
  CHECK(dump.find("in deep_in_here") != std::string::npos);
  CHECK(dump.find("in waiter") != std::string::npos);  // every thread
}
