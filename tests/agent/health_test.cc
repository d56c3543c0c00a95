// The agent's side of the health gate (agent/health.h): the temp-dir check
// on real directories, and the verdict of a real --health-check command.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "agent/health.h"

using namespace dl::agent;
using dl::machine::run_child;
using std::chrono::milliseconds;

TEST_CASE("health: a writable temp dir with room passes - one that is not writable or too full is named",
          "[agent][health]") {
  char tmpl[] = "/tmp/dl-health-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  CHECK(check_temp_dir(dir, 1) == "");
  const std::string full = check_temp_dir(dir, ~0ull);  // no disk has this much free
  CHECK(full.find("the temporary directory " + dir + " (TMPDIR) has ") == 0);
  CHECK(full.find("MiB free") != std::string::npos);
  CHECK(full.find("point TMPDIR elsewhere") != std::string::npos);
  const std::string gone = check_temp_dir(dir + "/none", 1);
  CHECK(gone.find("is not writable") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("health: a real check's verdict is its own last words, or how it ended", "[agent][health]") {
  const auto t = milliseconds(5000);
  CHECK(health_verdict(run_child({"/bin/sh", "-c", "exit 0"}, t, "check"), t) == "");
  CHECK(health_verdict(run_child({"/bin/sh", "-c", "echo 'GPU 2: ECC errors' >&2; exit 3"}, t, "check"), t) ==
        "GPU 2: ECC errors (exited with code 3)");
  CHECK(health_verdict(run_child({"/bin/sh", "-c", "echo a; echo b; exit 1"}, t, "check"), t) == "a / b (exited with code 1)");
  CHECK(health_verdict(run_child({"/bin/sh", "-c", "exit 4"}, t, "check"), t) == "exited with code 4");
  CHECK(health_verdict(run_child({"/bin/sh", "-c", "kill -9 $$"}, t, "check"), t) == "was killed by signal 9");
  const auto quick = milliseconds(300);
  const auto slow = run_child({"/bin/sh", "-c", "sleep 30"}, quick, "check");
  CHECK(slow.status == 124);
  CHECK(health_verdict(slow, milliseconds(60000)) == "did not finish within 60 s");
  const auto env = run_child({"/bin/sh", "-c", "echo \"$DLAUNCH_HOST\""}, t, "check", {"DLAUNCH_HOST=node7"});
  CHECK(env.out == "node7\n");
  // A check that prints without end is read, and kept only up to the bound.
  const auto loud = run_child({"/bin/sh", "-c", "yes | head -c 1000000"}, t, "check");
  CHECK(loud.status == 0);
  CHECK(loud.out.size() == dl::machine::kMaxCaptured);
}

TEST_CASE("health: the ranks' programs are found as the launch finds them - a missing one is named in the launch's words",
          "[agent][health]") {
  using dl::control::msg::ProgramProbe;
  CHECK(dl::agent::check_programs({}, "/usr/bin:/bin") == "");
  CHECK(dl::agent::check_programs({ProgramProbe{"sh", "", "/"}}, "/usr/bin:/bin") == "");
  CHECK(dl::agent::check_programs({ProgramProbe{"/bin/sh", "", ""}}, "") == "");
  // The job's -x PATH wins over the agent's own.
  CHECK(dl::agent::check_programs({ProgramProbe{"sh", "/nonexistent-dl", "/"}}, "/usr/bin:/bin") ==
        "the ranks' program sh: command not found in PATH");
  CHECK(dl::agent::check_programs({ProgramProbe{"sh", "", "/"}, ProgramProbe{"dl-no-such-prog", "", "/"}},
                                  "/usr/bin:/bin") == "the ranks' program dl-no-such-prog: command not found in PATH");
  // A relative program, from the ranks' directory.
  CHECK(dl::agent::check_programs({ProgramProbe{"./sh", "", "/bin"}}, "") == "");
  CHECK(dl::agent::check_programs({ProgramProbe{"./train", "", "/tmp"}}, "").find(
            "the ranks' program /tmp/./train: No such file or directory") == 0);
}

TEST_CASE("health: a script's interpreter is found as the kernel and env find it - a missing one names the #! line",
          "[agent][health]") {
  using dl::control::msg::ProgramProbe;
  char tmpl[] = "/tmp/dl-interp-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  auto script = [&](const std::string& name, const std::string& first_line) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fprintf(f, "%s\necho hi\n", first_line.c_str());
    std::fclose(f);
    REQUIRE(::chmod(path.c_str(), 0755) == 0);
  };
  script("plain", "#!/bin/sh");
  script("spaced", "#!  /bin/sh -e");
  script("env-sh", "#!/usr/bin/env sh");
  script("gone", "#!/opt/dl-no-such/bin/python3 -u");
  script("env-gone", "#!/usr/bin/env dl-no-such-python");
  script("env-split", "#!/usr/bin/env -S A=1 dl-no-such-python -u");
  script("env-split-ok", "#!/usr/bin/env -S -i A=1 sh -e");
  script("binary-like", "\x7f" "ELF");
  const std::string path = "/usr/bin:/bin";
  for (const char* ok : {"plain", "spaced", "env-sh", "env-split-ok", "binary-like"}) {
    INFO(ok);
    CHECK(check_programs({ProgramProbe{std::string("./") + ok, "", dir}}, path) == "");
  }
  CHECK(check_programs({ProgramProbe{"./gone", "", dir}}, path) ==
        "the ranks' program ./gone: its interpreter (#!/opt/dl-no-such/bin/python3 -u): "
        "/opt/dl-no-such/bin/python3: No such file or directory");
  CHECK(check_programs({ProgramProbe{"./env-gone", "", dir}}, path) ==
        "the ranks' program ./env-gone: its interpreter (#!/usr/bin/env dl-no-such-python): "
        "dl-no-such-python: command not found in PATH");
  CHECK(check_programs({ProgramProbe{"./env-split", "", dir}}, path) ==
        "the ranks' program ./env-split: its interpreter (#!/usr/bin/env -S A=1 dl-no-such-python -u): "
        "dl-no-such-python: command not found in PATH");
  // env looks on the ranks' PATH (the job's -x PATH), not the agent's: found there, it passes.
  CHECK(check_programs({ProgramProbe{"./env-sh", "/nonexistent-dl", dir}}, path) ==
        "the ranks' program ./env-sh: its interpreter (#!/usr/bin/env sh): sh: command not found in PATH");
  // A script found on PATH is read where it was found.
  CHECK(check_programs({ProgramProbe{"gone", dir, "/"}}, path).find("its interpreter (#!/opt/dl-no-such/bin/python3") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
