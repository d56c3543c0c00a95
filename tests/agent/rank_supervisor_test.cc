// RankSupervisor::spawn_all with real processes: ranks are started as they
// are prepared, from the spawn helpers, every one is reported once with its
// own exit code, and a preparer that throws leaves no rank unsupervised and
// no helper waiting.
#include <catch2/catch.hpp>

#include <algorithm>

#include <boost/asio.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <thread>
#include <variant>

#include "agent/rank_supervisor.h"
#include "wire/frame.h"

using namespace dl;
namespace msg = control::msg;

namespace {
struct Recorder {
  std::map<int, int> started;  // rank -> pid
  std::map<int, int> exit_code;
  // (rank, 0 stdout / 1 stderr) -> the bytes that came before its exit report
  std::map<std::pair<int, int>, std::string> output;
  int reports = 0;
  int lasts = 0;  // exited_clean reports that said every rank had ended
  std::vector<std::vector<int>> clean_reports;  // each exited_clean's ranks
  std::vector<size_t> failed_after_clean;       // for each exited: how many exits came before it
  agent::RankSupervisor::Hooks hooks() {
    agent::RankSupervisor::Hooks h;
    h.send = [this](std::string frame) {
      wire::FrameParser p(1 << 20);
      p.feed(frame.data(), frame.size());
      auto f = p.next();
      if (f && f->type == wire::kData) {
        auto chunk = control::parse_data(f->payload);
        if (exit_code.count(chunk.rank) == 0)
          output[{chunk.rank, chunk.stream == control::kStdout ? 0 : 1}] += std::string(chunk.bytes);
        return;
      }
      if (!f || f->type != wire::kJson) return;
      auto m = control::decode_from_agent(f->payload);
      if (auto* s = std::get_if<msg::Started>(&m)) started[s->rank] = s->pid;
      if (auto* x = std::get_if<msg::Exited>(&m)) exit_code[x->rank] = x->code.value_or(-1);
      if (auto* c = std::get_if<msg::ExitedClean>(&m)) {
        for (int r : c->ranks) exit_code[r] = 0;
        if (c->last) ++lasts;
        clean_reports.push_back(c->ranks);
      }
      if (std::holds_alternative<msg::Exited>(m)) failed_after_clean.push_back(exit_code.size() - 1);
    };
    h.congested = [] { return false; };
    h.reported = [this] { ++reports; };
    return h;
  }
};

agent::SpawnSpec exits_with(int code) {
  agent::SpawnSpec s;
  s.exe = "/bin/sh";
  s.argv = {"sh", "-c", "exit " + std::to_string(code)};
  s.env = {"PATH=/usr/bin:/bin"};
  return s;
}

void run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
  }
}
}  // namespace

TEST_CASE("spawn_all: 24 ranks prepared one by one all start and each is reported with its own code", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  std::vector<size_t> asked;
  sup.spawn_all(24, [&](size_t i) -> agent::RankSupervisor::Prepared {
    asked.push_back(i);
    if (i == 7) {  // a rank its preparer refused: not started, not waited for
      sup.refuse(107, 127, "no such program");
      return std::nullopt;
    }
    return std::make_pair(100 + static_cast<int>(i), exits_with(static_cast<int>(i)));
  });
  CHECK(asked.size() == 24);
  for (size_t i = 0; i < asked.size(); ++i) CHECK(asked[i] == i);  // prepared in order, once each
  run_until(io, [&] { return !sup.spawning(); });
  CHECK(rec.started.size() == 23);
  run_until(io, [&] { return sup.all_reported(); });
  REQUIRE(sup.all_reported());
  CHECK(rec.exit_code.size() == 23);  // each started rank's exit, and 107's refusal apart
  for (int i = 0; i < 24; ++i) {
    INFO("rank " << 100 + i);
    if (i == 7) CHECK(rec.started.count(107) == 0);
    else CHECK(rec.exit_code.at(100 + i) == i);
  }
}

TEST_CASE("spawn_all: a preparer that throws: the ranks already prepared run and are supervised, the error comes out",
          "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  CHECK_THROWS_WITH(sup.spawn_all(16,
                                  [&](size_t i) -> agent::RankSupervisor::Prepared {
                                    if (i == 10) throw std::runtime_error("out of something");
                                    return std::make_pair(static_cast<int>(i), exits_with(3));
                                  }),
                    "out of something");
  run_until(io, [&] { return !sup.spawning(); });
  CHECK(rec.started.size() == 10);  // 0-9, none after the throw
  run_until(io, [&] { return sup.all_reported(); });
  CHECK(sup.all_reported());
  CHECK(rec.exit_code.size() == 10);
  // The helpers are free again: a later batch runs.
  sup.forget_reported();
  sup.spawn_all(12, [&](size_t i) -> agent::RankSupervisor::Prepared {
    return std::make_pair(static_cast<int>(i), exits_with(0));
  });
  run_until(io, [&] { return sup.all_reported(); });
  CHECK(sup.all_reported());
  CHECK(rec.exit_code.size() == 12);
}

// A batch is started off the calling thread (the agent's loop): spawn_all
// returns while its ranks start, the loop goes on, and the ranks are
// supervised once all started. Ranks that end before that are reported
// with their own codes (their SIGCHLD came before they were ours).
TEST_CASE("spawn_all: the clones are made off the loop: it returns at once, the batch is adopted on the loop", "[agent]") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("one CPU: a batch is started from the calling thread, and this case has nothing to check");
    return;
  }
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  bool started = false;
  sup.spawn_all(
      16, [&](size_t i) -> agent::RankSupervisor::Prepared { return std::make_pair(static_cast<int>(i), exits_with(static_cast<int>(i))); },
      [&] { started = true; });
  CHECK(sup.spawning());
  CHECK_FALSE(started);           // not before the loop runs the hand back
  CHECK_FALSE(sup.all_reported());  // nothing is over while ranks are being started
  CHECK(sup.any_running());
  CHECK(rec.started.empty());
  run_until(io, [&] { return sup.all_reported(); });
  CHECK(started);
  CHECK_FALSE(sup.spawning());
  REQUIRE(rec.exit_code.size() == 16);
  for (int i = 0; i < 16; ++i) CHECK(rec.exit_code.at(i) == i);
}

// A signal sent while the batch starts (the agent's own SIGKILL when it
// loses the launcher, a teardown's SIGTERM) reaches each of its ranks as it
// is adopted.
TEST_CASE("spawn_all: kill_all or signal_all while a batch starts reaches its ranks once they are adopted", "[agent]") {
  for (const bool kill : {true, false}) {
    INFO((kill ? "kill_all" : "signal_all(SIGTERM)"));
    boost::asio::io_context io;
    Recorder rec;
    agent::RankSupervisor sup(io, rec.hooks());
    const auto t0 = std::chrono::steady_clock::now();
    sup.spawn_all(
        16,
        [&](size_t i) -> agent::RankSupervisor::Prepared {
          agent::SpawnSpec s = exits_with(0);
          s.argv = {"sh", "-c", "exec sleep 60"};
          return std::make_pair(static_cast<int>(i), s);
        },
        {});
    if (kill) sup.kill_all();
    else sup.signal_all(SIGTERM);
    run_until(io, [&] { return sup.all_reported(); });
    REQUIRE(sup.all_reported());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    REQUIRE(rec.exit_code.size() == 16);
    for (int i = 0; i < 16; ++i) CHECK(rec.exit_code.at(i) == -1);  // ended by the signal, no exit code
    // The next batch starts unsignalled.
    sup.forget_reported();
    rec.exit_code.clear();
    sup.spawn_all(
        8, [&](size_t i) -> agent::RankSupervisor::Prepared { return std::make_pair(static_cast<int>(i), exits_with(5)); },
        {});
    run_until(io, [&] { return sup.all_reported(); });
    REQUIRE(rec.exit_code.size() == 8);
    for (int i = 0; i < 8; ++i) CHECK(rec.exit_code.at(i) == 5);
  }
}

// A host whose ranks all succeed costs its link one exit report, not one per
// rank (control/messages.h, ExitedClean).
TEST_CASE("exits: a host's clean exits go as one exited_clean once its last rank ended", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  sup.spawn_all(8, [&](size_t i) -> agent::RankSupervisor::Prepared {
    return std::make_pair(static_cast<int>(i), exits_with(0));
  });
  run_until(io, [&] { return sup.all_reported(); });
  REQUIRE(sup.all_reported());
  REQUIRE(rec.clean_reports.size() == 1);
  auto ranks = rec.clean_reports[0];
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(rec.lasts == 1);
  CHECK(rec.reports == 1);
}

// A failure is not held: it goes at once, after the clean exits held so far,
// while a rank still runs (so no report says `last`).
TEST_CASE("exits: a failure goes at once, after the clean exits held before it", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  auto sleeper = exits_with(0);
  sleeper.argv = {"sh", "-c", "sleep 30"};
  auto late_failure = exits_with(0);
  late_failure.argv = {"sh", "-c", "sleep 0.3; exit 5"};
  sup.spawn_all(4, [&](size_t i) -> agent::RankSupervisor::Prepared {
    return std::make_pair(static_cast<int>(i), i == 0 ? sleeper : i == 1 ? late_failure : exits_with(0));
  });
  run_until(io, [&] { return rec.exit_code.count(1) == 1; });
  REQUIRE(rec.exit_code.count(1) == 1);
  CHECK(rec.exit_code.at(1) == 5);
  // Ranks 2 and 3 ended first and were held; the failure sent them before itself.
  REQUIRE(rec.clean_reports.size() == 1);
  CHECK(rec.clean_reports[0].size() == 2);
  REQUIRE(rec.failed_after_clean.size() == 1);
  CHECK(rec.failed_after_clean[0] == 2);
  CHECK(rec.lasts == 0);
  CHECK_FALSE(sup.all_reported());
  sup.kill_all();
  run_until(io, [&] { return sup.all_reported(); });
  CHECK(sup.all_reported());
}

namespace {
// How many of this process's descriptors are pty masters (/dev/ptmx).
int open_pty_masters() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code lec;
    if (std::filesystem::read_symlink(e.path(), lec).string() == "/dev/ptmx") ++n;
  }
  return n;
}
}  // namespace

// Ranks whose stdout is a pty, their output read to the end: every master is
// closed once its rank is reported (the helper threads close them, beside
// the loop), none left open, and each rank's output arrived before its exit.
TEST_CASE("spawn_all: pty masters of ended ranks are all closed, and their output came first", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  const int before = open_pty_masters();
  sup.spawn_all(12, [&](size_t i) -> agent::RankSupervisor::Prepared {
    agent::SpawnSpec s;
    s.exe = "/bin/sh";
    s.argv = {"sh", "-c", "echo out-" + std::to_string(i)};
    s.env = {"PATH=/usr/bin:/bin"};
    s.stdout_pty = true;
    return std::make_pair(static_cast<int>(i), s);
  });
  run_until(io, [&] { return sup.all_reported(); });
  REQUIRE(sup.all_reported());
  for (int i = 0; i < 12; ++i) CHECK(rec.output[{i, 0}] == "out-" + std::to_string(i) + "\n");
  int left = open_pty_masters() - before;
  for (int i = 0; i < 100 && left > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = open_pty_masters() - before;
  }
  CHECK(left == 0);
}

// A rank's streams are read at once when it is adopted and handed to the
// loop only when they would block (docs/design.md, "A rank's output is read
// before it is watched"): output larger than one turn's reads, written
// while the agent's thread was still starting ranks, and output written
// after a pause, once the streams wait in the loop, all arrive, whole and
// before the exit, on the pty and on the stderr pipe alike.
TEST_CASE("spawn_all: output before, across and after the streams' first wait arrives whole", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  agent::RankSupervisor sup(io, rec.hooks());
  // 600 kB to each stream (more than the 4 reads of 64 KiB one turn takes,
  // and than a pipe holds: the rank waits for the agent mid-way), then,
  // for the odd ranks, a pause and one more line on each.
  const std::string big = "head -c 600000 /dev/zero | tr '\\0' x; head -c 600000 /dev/zero | tr '\\0' y >&2";
  sup.spawn_all(8, [&](size_t i) -> agent::RankSupervisor::Prepared {
    agent::SpawnSpec s;
    s.exe = "/bin/sh";
    s.argv = {"sh", "-c", big + (i % 2 ? "; sleep 0.3; echo late; echo late-err >&2" : "")};
    s.env = {"PATH=/usr/bin:/bin"};
    s.stdout_pty = true;
    return std::make_pair(static_cast<int>(i), s);
  });
  run_until(io, [&] { return sup.all_reported(); });
  REQUIRE(sup.all_reported());
  for (int i = 0; i < 8; ++i) {
    INFO("rank " << i);
    CHECK(rec.exit_code.at(i) == 0);
    const std::string late = i % 2 ? "late\n" : "", late_err = i % 2 ? "late-err\n" : "";
    CHECK(rec.output[{i, 0}].size() == 600000 + late.size());
    CHECK((rec.output[{i, 0}] == std::string(600000, 'x') + late));  // (not printed whole when it differs)
    CHECK(rec.output[{i, 1}].size() == 600000 + late_err.size());
    CHECK((rec.output[{i, 1}] == std::string(600000, 'y') + late_err));
  }
}

// What a child resets before exec: every signal with a handler or SIG_IGN
// here, as each one's disposition says (read from /proc/self/status now).
TEST_CASE("non_default_signals: the handled and ignored signals, as sigaction sees them", "[agent]") {
  struct sigaction handled {}, ignored {}, old_usr1 {}, old_usr2 {};
  handled.sa_handler = [](int) {};
  ignored.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR1, &handled, &old_usr1);
  ::sigaction(SIGUSR2, &ignored, &old_usr2);
  const sigset_t set = agent::non_default_signals();
  CHECK(sigismember(&set, SIGUSR1) == 1);
  CHECK(sigismember(&set, SIGUSR2) == 1);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction now {};
    ::sigaction(sig, nullptr, &now);
    INFO("signal " << sig);
    CHECK((sigismember(&set, sig) == 1) == (now.sa_handler != SIG_DFL));
  }
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGUSR2, &old_usr2, nullptr);
}

// The agent forgets an attempt's ranks from inside the report of its last
// one (Agent::ready_if_done, when a restart waits): a rank whose output
// ended before it exited is reported from the reaper, which must not touch
// the rank's entry after the report (it is gone from the table then). Each
// rank here closes its stdout and stderr, then fails.
TEST_CASE("exits: the last rank's report may forget every rank, also when the reaper sends it", "[agent]") {
  boost::asio::io_context io;
  Recorder rec;
  auto hooks = rec.hooks();
  agent::RankSupervisor* sup_ptr = nullptr;
  int forgotten = 0;
  hooks.reported = [&] {
    ++rec.reports;
    if (sup_ptr->all_reported()) {
      sup_ptr->forget_reported();
      ++forgotten;
    }
  };
  agent::RankSupervisor sup(io, hooks);
  sup_ptr = &sup;
  auto closes_then_fails = exits_with(0);
  closes_then_fails.argv = {"sh", "-c", "exec >&- 2>&-; sleep 0.3; exit 3"};
  for (int attempt = 0; attempt < 3; ++attempt) {
    INFO("attempt " << attempt);
    rec.exit_code.clear();
    sup.spawn_all(6, [&](size_t i) -> agent::RankSupervisor::Prepared {
      return std::make_pair(static_cast<int>(i), closes_then_fails);
    });
    run_until(io, [&] { return forgotten == attempt + 1; });
    CHECK(forgotten == attempt + 1);
    CHECK(rec.exit_code.size() == 6);
    for (const auto& [rank, code] : rec.exit_code) CHECK(code == 3);
  }
}
