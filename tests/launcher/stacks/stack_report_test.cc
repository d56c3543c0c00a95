// The stack report's pure parts: reading the main thread out of each tool's
// text (texts as faulthandler, eu-stack and gdb print them), grouping ranks
// by stack, and the summary lines.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "launcher/stacks/stack_report.h"

using namespace dl::launcher;

namespace {
// faulthandler, all_threads=True: newest thread first, the main thread last.
std::string python_dump(const std::string& inner) {
  return "Thread 0x00007f3a1c9ff6c0 (most recent call first):\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
         "  File \"/usr/lib/python3.11/threading.py\", line 1002 in _bootstrap\n"
         "\n"
         "Current thread 0x00007f3a1d5c7040 (most recent call first):\n"
         "  File \"/work/train.py\", line 12 in " + inner + "\n"
         "  File \"/work/train.py\", line 30 in train_step\n"
         "  File \"/work/train.py\", line 41 in <module>\n";
}

const char* kEuStack =
    "PID 4242 - process\n"
    "TID 4243:\n"
    "#0  0x00007f90f7015df2 pause\n"
    "#1  0x00005585e584816a bg\n"
    "#2  0x00007f90f6fcb1f5 start_thread\n"
    "TID 4242:\n"
    "#0  0x00007f90f7011545 clock_nanosleep@GLIBC_2.2.5\n"
    "#1  0x00007f90f7015e53 __nanosleep\n"
    "#2  0x00007f90f7015d8a sleep\n"
    "#3  0x00005585e584817a inner\n"
    "#4  0x00005585e58481b2 main\n"
    "#5  0x00007f90f6f6924a __libc_start_call_main\n"
    "#6  0x00005585e5848091 _start\n";

const char* kGdb =
    "[Thread debugging using libthread_db enabled]\n"
    "0x00007f6380addbd3 in __GI___wait4 (pid=-1) at ../sysdeps/unix/sysv/linux/wait4.c:30\n"
    "\n"
    "Thread 2 (Thread 0x7f63 (LWP 5151) \"a\"):\n"
    "#0  0x00007f6380addbd3 in pause () at pause.c:29\n"
    "#1  0x0000563 in bg (p=0x0) at a.c:3\n"
    "\n"
    "Thread 1 (Thread 0x7f6380a07740 (LWP 5150) \"a\"):\n"
    "#0  0x00007f6380addbd3 in __GI___clock_nanosleep (clockid=0, flags=0) at clock_nanosleep.c:48\n"
    "#1  0x000056391f668aba in read_batch (fd=3) at a.c:12\n"
    "#2  main () at a.c:20\n"
    "[Inferior 1 (process 5150) detached]\n";

RankStackEntry python_rank(int rank, const std::string& inner, const std::string& host = "node1") {
  return {rank, host, 1000 + rank, "python", python_dump(inner), ""};
}
}  // namespace

TEST_CASE("stack report: a Python dump's main thread is its last, innermost first", "[launcher]") {
  CHECK(main_thread_frames("python", python_dump("all_reduce"), 1) ==
        std::vector<std::string>{"all_reduce (train.py:12)", "train_step (train.py:30)", "<module> (train.py:41)"});
  // mpi4py's hang, as the audit saw it: the line is where the rank is.
  CHECK(main_thread_frames("python", "Current thread 0x00007f (most recent call first):\n"
                                     "  File \"/tmp/x/hangpy.py\", line 6 in <module>\n", 1) ==
        std::vector<std::string>{"<module> (hangpy.py:6)"});
  CHECK(main_thread_frames("python", "  File \"<string>\", line 1 in <module>\n", 1) ==
        std::vector<std::string>{"<module> (<string>:1)"});
}

TEST_CASE("stack report: eu-stack's main thread is TID == pid, cut at main", "[launcher]") {
  CHECK(main_thread_frames("eu-stack", kEuStack, 4242) ==
        std::vector<std::string>{"clock_nanosleep", "__nanosleep", "sleep", "inner", "main"});
  // Another pid: no TID matches, the first thread is taken.
  CHECK(main_thread_frames("eu-stack", kEuStack, 1).front() == "pause");
}

TEST_CASE("stack report: gdb's main thread is (LWP pid), arguments and files dropped", "[launcher]") {
  CHECK(main_thread_frames("gdb", kGdb, 5150) == std::vector<std::string>{"__clock_nanosleep", "read_batch", "main"});
  CHECK(main_thread_frames("gdb", kGdb, 5151) == std::vector<std::string>{"pause", "bg"});
}

TEST_CASE("stack report: frame lines as function names", "[launcher]") {
  CHECK(frame_function("#3  0x00007f12 in read (fd=3) at io.c:12") == "read");
  CHECK(frame_function("#2  main () at a.c:20") == "main");
  CHECK(frame_function("#1  0x000056391f6673f2 in ?? ()") == "??");
  CHECK(frame_function("#1  0x000056391f6673f2") == "??");
  CHECK(frame_function("#7  0x00007f6380a31305 __libc_start_main@@GLIBC_2.34") == "__libc_start_main");
  CHECK(frame_function("#4  <signal handler called>") == "<signal handler>");
}

TEST_CASE("stack report: rank ranges", "[launcher]") {
  CHECK(rank_ranges({0, 1, 2, 3, 4, 6, 8, 9}) == "0-4, 6, 8-9");
  CHECK(rank_ranges({7, 3, 3, 2}) == "2-3, 7");
  CHECK(rank_ranges({5}) == "5");
  CHECK(rank_ranges({}).empty());
}

TEST_CASE("stack report: 8 ranks, rank 5 elsewhere: it comes first, the 7 grouped", "[launcher]") {
  std::vector<RankStackEntry> s;
  for (int r = 7; r >= 0; --r) s.push_back(python_rank(r, r == 5 ? "load_batch" : "all_reduce", r < 4 ? "node1" : "node2"));
  auto g = group_stacks(s);
  REQUIRE(g.size() == 2);
  CHECK(g[0].ranks == std::vector<int>{5});
  CHECK(summary_line(g[0]) == "rank 5 on node2: load_batch (train.py:12) <- train_step (train.py:30) <- <module> (train.py:41)");
  CHECK(g[1].ranks == std::vector<int>{0, 1, 2, 3, 4, 6, 7});
  CHECK(g[1].hosts == std::vector<std::string>{"node1", "node2"});
  CHECK(summary_line(g[1]) == "ranks 0-4, 6-7 (7): all_reduce (train.py:12) <- train_step (train.py:30) <- <module> (train.py:41)");
}

TEST_CASE("stack report: addresses and line numbers do not split a group", "[launcher]") {
  std::string other = kEuStack;
  other.replace(other.find("0x00005585e584817a"), 18, "0x00005585e5841111");
  std::vector<RankStackEntry> s = {{0, "a", 4242, "eu-stack", kEuStack, ""}, {1, "b", 4242, "eu-stack", other, ""}};
  auto g = group_stacks(s);
  REQUIRE(g.size() == 1);
  CHECK(g[0].ranks == std::vector<int>{0, 1});
}

TEST_CASE("stack report: ranks without a stack group by reason, hosts named", "[launcher]") {
  const std::string none = "neither eu-stack nor gdb is installed on this host";
  std::vector<RankStackEntry> s = {{0, "node1", 10, "", "", none}, {1, "node1", 11, "", "", none},
                                   {2, "node2", 12, "python", python_dump("step"), ""},
                                   {3, "node2", 13, "python", "", "did not answer within 10 s"}};
  auto g = group_stacks(s);
  REQUIRE(g.size() == 3);
  CHECK(summary_line(g[0]) == "rank 2 on node2: step (train.py:12) <- train_step (train.py:30) <- <module> (train.py:41)");
  CHECK(summary_line(g[1]) == "rank 3 on node2: did not answer within 10 s");
  CHECK(summary_line(g[2]) == "ranks 0-1 (2) on node1: " + none);
}

TEST_CASE("stack report: a deep stack is cut in the summary, not in the group", "[launcher]") {
  StackGroup g{{4}, {"h"}, {}, ""};
  for (int i = 0; i < 12; ++i) g.frames.push_back("f" + std::to_string(i));
  CHECK(summary_line(g) == "rank 4 on h: f0 <- f1 <- f2 <- f3 <- f4 <- f5 <- f6 <- f7 <- ... (4 more)");
}

TEST_CASE("stack report: a run of unnamed frames counts once, so MPICH's PMPI_Barrier <- main stay on the line",
          "[launcher]") {
  StackGroup g{{0}, {"localhost"}, {}, ""};
  for (int i = 0; i < 9; ++i) g.frames.push_back("??");
  g.frames.insert(g.frames.end(), {"PMPI_Barrier", "main"});
  CHECK(summary_line(g) == "rank 0 on localhost: ?? x9 <- PMPI_Barrier <- main");
  g.frames = {"??", "ucp_worker_progress", "??", "??", "??", "PMPI_Barrier", "main"};
  CHECK(summary_line(g) == "rank 0 on localhost: ?? <- ucp_worker_progress <- ?? x3 <- PMPI_Barrier <- main");
  // The group keeps every frame: the JSON report lists them all.
  CHECK(g.frames.size() == 7);
}

TEST_CASE("stack report: the JSON report carries groups and every rank's frames", "[launcher]") {
  std::vector<RankStackEntry> s = {python_rank(0, "a"), python_rank(1, "b"), {2, "node1", 3, "", "", "had ended"}};
  auto j = nlohmann::json::parse(json_report("SIGQUIT", group_stacks(s), s));
  CHECK(j["reason"] == "SIGQUIT");
  REQUIRE(j["groups"].size() == 3);
  CHECK(j["groups"][2]["error"] == "had ended");
  REQUIRE(j["ranks"].size() == 3);
  CHECK(j["ranks"][1]["frames"][0] == "b (train.py:12)");
  CHECK(j["ranks"][1]["how"] == "python");
  CHECK_FALSE(j["ranks"][0].contains("error"));
  // A tool's bytes that are not UTF-8 are replaced, so JSON readers take the report.
  std::vector<RankStackEntry> raw = {{0, "node1", 7, "gdb", "#0 f\xff\xc3(\xe9)", ""}};
  auto r = nlohmann::json::parse(json_report("SIGQUIT", group_stacks(raw), raw));
  CHECK(r["ranks"][0]["text"] == "#0 f\xef\xbf\xbd\xef\xbf\xbd(\xef\xbf\xbd)");
  // The text file names each rank's full stack.
  const std::string txt = full_report("title", group_stacks(s), s);
  CHECK(txt.find("=== rank 1 on node1 (pid 1001, python) ===") != std::string::npos);
  CHECK(txt.find("line 12 in b") != std::string::npos);
}

TEST_CASE("stack report: the JSON report lists the job's membership changes - alone when there was no stack report",
          "[launcher]") {
  MembershipChange moved, beneath, spare;
  moved.attempt = 2, moved.at_s = 12.5, moved.kind = "moved", moved.host = "node4", moved.why = "connection reset";
  moved.ranks = {8, 9}, moved.to_host = "node9";
  beneath.attempt = 2, beneath.at_s = 12.5, beneath.kind = "new_agent", beneath.host = "node5";
  beneath.why = "lost with the agent on node4", beneath.ranks = {10}, beneath.to_host = "dlaunch";
  spare.attempt = 3, spare.at_s = 40, spare.kind = "lost_spare", spare.host = "node8", spare.why = "no heartbeat for 10 s";
  auto j = nlohmann::json::parse(json_membership({moved, beneath, spare}));
  CHECK_FALSE(j.contains("reason"));
  CHECK_FALSE(j.contains("groups"));
  REQUIRE(j["membership"].size() == 3);
  CHECK(j["membership"][0]["attempt"] == 2);
  CHECK(j["membership"][0]["at_s"] == 12.5);
  CHECK(j["membership"][0]["kind"] == "moved");
  CHECK(j["membership"][0]["host"] == "node4");
  CHECK(j["membership"][0]["why"] == "connection reset");
  CHECK(j["membership"][0]["ranks"] == nlohmann::json::array({8, 9}));
  CHECK(j["membership"][0]["to_host"] == "node9");
  CHECK(j["membership"][1]["to_host"] == "dlaunch");
  CHECK(j["membership"][2]["kind"] == "lost_spare");
  CHECK(j["membership"][2]["ranks"].empty());
  // Beside a stack report: its fields, and the changes.
  std::vector<RankStackEntry> s = {python_rank(0, "a")};
  auto r = nlohmann::json::parse(json_report("--timeout 5 s", group_stacks(s), s, {moved}));
  CHECK(r["reason"] == "--timeout 5 s");
  CHECK(r["ranks"].size() == 1);
  REQUIRE(r["membership"].size() == 1);
  CHECK(r["membership"][0]["host"] == "node4");
  CHECK(nlohmann::json::parse(json_report("SIGQUIT", group_stacks(s), s))["membership"].empty());
}
