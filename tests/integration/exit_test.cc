// Exit codes and verdict lines: the first failure decides, signals become
// 128+N, a missing or non-executable program behaves as in a shell.
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// dlaunch's own lines on stderr ("dlaunch: ...").
std::vector<std::string> dlaunch_lines(const std::string& err) {
  std::vector<std::string> out;
  for (const auto& l : lines(err))
    if (l.rfind("dlaunch:", 0) == 0) out.push_back(l);
  return out;
}

// Rank processes print "pid=<pid>" first, so the verdict's pid can be checked.
std::string pid_printed_by(const std::string& out, const std::string& tag) {
  for (const auto& l : lines(out))
    if (l.rfind(tag + "pid=", 0) == 0) return l.substr(tag.size() + 4);
  return "";
}
}  // namespace

TEST_CASE("all ranks exit 0: dlaunch exits 0 and says nothing", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "4", "/bin/true"};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.empty());
}

TEST_CASE("a rank's exit code becomes dlaunch's, with one verdict line naming rank, host and pid",
          "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "4", "--kill-grace", "1", "--tag-output", "/bin/sh", "-c",
            "if [ \"$RANK\" = 2 ]; then echo pid=$$; exit 3; fi; sleep \"$0\"", m};
  RunResult r = run(s);
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  const std::string pid = pid_printed_by(r.out, "[2@localhost] ");
  REQUIRE(!pid.empty());
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0] == "dlaunch: rank 2 on localhost (pid " + pid + ") exited with code 3");
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("a rank killed by SIGSEGV: exit 139 and the signal's name", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--kill-grace", "1", "--tag-output", "/bin/sh", "-c",
            "if [ \"$RANK\" = 1 ]; then echo pid=$$; kill -SEGV $$; fi; sleep \"$0\"", m};
  RunResult r = run(s);
  INFO(r.out << r.err);
  CHECK(r.code == 139);
  const std::string pid = pid_printed_by(r.out, "[1@localhost] ");
  REQUIRE(!pid.empty());
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].rfind("dlaunch: rank 1 on localhost (pid " + pid + ") was killed by signal 11 (Segmentation fault)", 0) == 0);
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("the first failure decides, not a later one nor an OR of codes", "[integration]") {
  // Rank 1 exits 5 first; the others exit 7 when the teardown's SIGTERM
  // reaches them: those later failures must not change the verdict (5|7 = 7).
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--kill-grace", "2", "/bin/sh", "-c",
            "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 5; fi; trap 'exit 7' TERM; sleep \"$0\" & wait", m};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 5);
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].find("rank 1 on localhost") != std::string::npos);
  CHECK(mine[0].find("exited with code 5") != std::string::npos);
  // Ranks that ended because the teardown's SIGTERM reached them are
  // consequences: they are not listed after the verdict.
  CHECK(mine[0].find("also") == std::string::npos);
  dl::it::kill_marked(m);  // the backgrounded sleeps were killed with their group; be sure
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("a rank that fails by itself after the first failure is named after the verdict", "[integration]") {
  // Rank 0 exits 3 once rank 1 is ready. The teardown sends rank 1 SIGTERM,
  // on which it SIGKILLs itself: a signal dlaunch never sent, so the verdict
  // names it too, while the exit code stays the first failure's.
  const std::string m = new_marker();
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--kill-grace", "5", "--tag-output", "/bin/sh", "-c",
            "if [ \"$RANK\" = 1 ]; then echo pid=$$; trap 'kill -KILL $$' TERM; touch \"$1/ready\"; "
            "sleep \"$0\" & wait; exit 0; fi; "
            "while [ ! -f \"$1/ready\" ]; do sleep 0.01; done; exit 3",
            m, tmp.path};
  RunResult r = run(s);
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  const std::string pid = pid_printed_by(r.out, "[1@localhost] ");
  REQUIRE(!pid.empty());
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK_THAT(mine[0], Catch::StartsWith("dlaunch: rank 0 on localhost (pid "));
  CHECK_THAT(mine[0], Catch::EndsWith(") exited with code 3; before dlaunch stopped them, also rank 1 on localhost (pid " +
                                      pid + ") was killed by signal 9 (Killed)"));
  CHECK(r.seconds < 4);  // rank 1 ended at the SIGTERM, not at the end of --kill-grace
  dl::it::kill_marked(m);
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("a rank killed from outside is named even when a survivor's error arrives first", "[integration]") {
  // Rank 1 is SIGKILLed (as the OOM killer would); rank 0 notices at once
  // and exits 1, as a survivor of a broken collective does. Whichever exit
  // reaches the launcher first, the killed rank must be in the verdict.
  const std::string m = new_marker();
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--kill-grace", "1", "/bin/sh", "-c",
            "if [ \"$RANK\" = 1 ]; then echo $$ > \"$1/pid.tmp\"; mv \"$1/pid.tmp\" \"$1/pid\"; "
            "sleep 0.2; kill -KILL $$; fi; "
            "while [ ! -f \"$1/pid\" ]; do sleep 0.01; done; p=$(cat \"$1/pid\"); "
            "while kill -0 \"$p\" 2>/dev/null; do :; done; exit 1; : \"$0\"",
            m, tmp.path};
  RunResult r = run(s);
  INFO(r.err);
  CHECK((r.code == 1 || r.code == 137));
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].find("rank 1 on localhost (pid ") != std::string::npos);
  CHECK(mine[0].find("was killed by signal 9 (Killed)") != std::string::npos);
  CHECK(wait_marked_gone(m, 2).empty());
}

TEST_CASE("a program that does not exist: exit 127 and one clear line", "[integration]") {
  TempDir tmp;
  const std::string missing = tmp.path + "/no-such-program";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", missing, "arg"};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 127);
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].find(missing) != std::string::npos);
  CHECK(mine[0].find("No such file") != std::string::npos);
  CHECK(lines(r.err).size() == 1);
}

TEST_CASE("a command not in PATH: exit 127 and the line says so", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "dlaunch-it-no-such-command"};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 127);
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].find("dlaunch-it-no-such-command") != std::string::npos);
  CHECK(mine[0].find("PATH") != std::string::npos);
}

TEST_CASE("a file that is not executable: exit 126", "[integration]") {
  TempDir tmp;
  const std::string script = tmp.path + "/not-executable.sh";
  write_file(script, "#!/bin/sh\necho should not run\n", 0644);
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", script};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 126);
  CHECK(r.out.empty());
  auto mine = dlaunch_lines(r.err);
  REQUIRE(mine.size() == 1);
  CHECK(mine[0].find(script) != std::string::npos);
  CHECK(mine[0].find("Permission denied") != std::string::npos);
}
