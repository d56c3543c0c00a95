// The agent's MPI side (mpi/mpi_side.h) without an agent: what task_env
// gives a rank in each mode, that the socket it hands out is the PMI
// server's (a real PMI-1 exchange over it), and what MPI messages are
// answered with through the one send hook.
#include "mpi/mpi_side.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <chrono>

#include "control/env_names.h"
#include "errors/error.h"

using namespace dl::mpi;
namespace control = dl::control;
namespace msg = dl::control::msg;

namespace {

struct Side {
  boost::asio::io_context io;
  std::vector<control::MpiUp> sent;
  std::vector<std::string> children_refused;  // start_children's errors
  MpiSide side{io, MpiHooks{
                       [this](control::MpiUp m) { sent.push_back(std::move(m)); },
                       [](uint64_t, std::string) {},
                       [this](const msg::SpawnLaunch&, const std::vector<EnvList>&, const std::string& error) {
                         children_refused.push_back(error);
                       },
                   }};
  // Runs the loop until `done`, or fails naming `what` after 10 s.
  template <class Pred> void run_until(Pred done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) FAIL("timed out after 10 s waiting for " << what);
      io.run_one_for(std::chrono::milliseconds(50));
      if (io.stopped()) io.restart();
    }
  }
};

// Two ranks on this host, one job, serving `serve`.
msg::MpiSection section(const std::string& serve) {
  return msg::MpiSection{"dl-side-test", 2, 0, 2, {"h0"}, {{0, 1}}, std::nullopt, serve};
}

std::string value(const TaskEnv& t, const std::string& key) {
  for (const auto& [k, v] : t.vars)
    if (k == key) return v;
  return "";
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

// What `fd` is (device and inode), or {0, 0} when it is closed: a closed
// descriptor's number may be taken again at once by another thread of the
// process (libpmix's), so "still open" is "still the same file".
std::pair<dev_t, ino_t> file_of(int fd) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// Bytes the peer wrote on `fd` so far (non-blocking).
std::string drain(int fd) {
  char buf[512];
  const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

TEST_CASE("mpi side: a rank of a job without MPI gets no variables and no socket", "[mpi]") {
  Side s;
  const TaskEnv t = s.side.task_env(0);
  CHECK(t.vars.empty());
  CHECK(t.inherit_fd == -1);
  s.side.task_refused(0);  // nothing to close: no error
}

TEST_CASE("mpi side: --mpi pmi gives each rank PMI_FD and a socket of its own that the PMI server answers", "[mpi]") {
  Side s;
  s.side.start(section("pmi"));
  const TaskEnv t0 = s.side.task_env(0), t1 = s.side.task_env(1);
  CHECK(value(t0, dl::env::kPmiFd) == std::to_string(dl::env::kRankInheritedFd));
  CHECK(value(t0, "PMIX_RANK").empty());  // no PMIx served
  REQUIRE(t0.inherit_fd >= 3);
  REQUIRE(t1.inherit_fd >= 3);
  CHECK(t0.inherit_fd != t1.inherit_fd);
  // Rank 1 is refused: its socket is closed here.
  s.side.task_refused(1);
  CHECK_FALSE(is_open(t1.inherit_fd));
  // Rank 0 "was spawned": its end is ours now, and MPICH's first line is answered.
  s.side.task_spawned(0);
  s.side.tasks_started();
  const std::string init = "cmd=init pmi_version=1 pmi_subversion=1\n";
  REQUIRE(::write(t0.inherit_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
  std::string answer;
  s.run_until([&] { return (answer += drain(t0.inherit_fd)).find('\n') != std::string::npos; },
              "the PMI server's response_to_init");
  CHECK(answer.rfind("cmd=response_to_init", 0) == 0);
  CHECK(answer.find("rc=0") != std::string::npos);
  CHECK(s.sent.empty());
  ::close(t0.inherit_fd);
}

// --max-restarts: each attempt is started again, in a namespace of its own.
TEST_CASE("mpi side: a restarted job's next attempt has its own PMI key space, and nothing of the last one is sent "
          "after attempt_over",
          "[mpi][restart]") {
  Side s;
  // Writes `lines` as rank 0 on `fd` and waits for the answer to the last
  // one (get_my_kvsname), which names the key space.
  auto ask = [&](int fd, const std::string& lines) {
    const std::string all = lines + "cmd=get_my_kvsname\n";
    REQUIRE(::write(fd, all.data(), all.size()) == static_cast<ssize_t>(all.size()));
    std::string answer;
    s.run_until([&] { return (answer += drain(fd)).find("cmd=my_kvsname") != std::string::npos &&
                             answer.find('\n', answer.find("cmd=my_kvsname")) != std::string::npos; },
                "the PMI server's my_kvsname");
    return answer;
  };
  auto start_rank0 = [&](const msg::MpiSection& sec) {
    s.side.start(sec);
    const TaskEnv t0 = s.side.task_env(0), t1 = s.side.task_env(1);
    s.side.task_refused(1);
    s.side.task_spawned(0);
    s.side.tasks_started();
    return t0.inherit_fd;
  };
  const std::string init = "cmd=init pmi_version=1 pmi_subversion=1\n";
  msg::MpiSection first = section("pmi");
  const int a0 = start_rank0(first);
  CHECK(ask(a0, init + "cmd=abort exitcode=3\n").find("kvsname=dl-side-test\n") != std::string::npos);
  REQUIRE(s.sent.size() == 1);
  CHECK(std::get<msg::MpiAbort>(s.sent[0]).status == 3);
  // The attempt is over: its server still answers its socket, but what it
  // would tell the launcher is dropped.
  s.side.attempt_over();
  ask(a0, "cmd=abort exitcode=4\n");
  CHECK(s.sent.size() == 1);
  msg::MpiSection next = section("pmi");
  next.nspace = "dl-side-test.a1";
  const int a1 = start_rank0(next);
  CHECK(a1 != a0);
  CHECK(ask(a1, init + "cmd=abort exitcode=5\n").find("kvsname=dl-side-test.a1\n") != std::string::npos);
  REQUIRE(s.sent.size() == 2);
  CHECK(std::get<msg::MpiAbort>(s.sent[1]).status == 5);
  ::close(a0), ::close(a1);
}

TEST_CASE("mpi side: serve refuse (per-node mode): a rank that starts PMI is reported once, not served", "[mpi]") {
  Side s;
  s.side.start(section("refuse"));
  const TaskEnv t = s.side.task_env(1);
  REQUIRE(t.inherit_fd >= 3);
  // With libpmix the rank also gets the tripwire's PMIx variables.
  if (MpiSide::available()) CHECK(value(t, "PMIX_RANK") == "1");
  s.side.task_spawned(1);
  s.side.tasks_started();
  const std::string init = "cmd=init pmi_version=1 pmi_subversion=1\n";
  REQUIRE(::write(t.inherit_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
  s.run_until([&] { return !s.sent.empty(); }, "the PMI tripwire's report");
  REQUIRE(s.sent.size() == 1);
  const auto& r = std::get<msg::MpiRefused>(s.sent[0]);
  CHECK(r.rank == 1);
  CHECK(r.wire == "PMI");
  ::close(t.inherit_fd);
}

TEST_CASE("mpi side: MPI requests on a host without a PMIx server are answered, not dropped", "[mpi]") {
  Side s;
  s.side.receive(msg::MpiDmodexServe{5, 0});
  REQUIRE(s.sent.size() == 1);
  const auto& d = std::get<msg::MpiDmodexData>(s.sent[0]);
  CHECK(d.id == 5);
  CHECK_FALSE(d.ok);

  msg::SpawnLaunch known{7, "dl-x.spawn1", "dl-x", 0, {1}, {msg::RankSpec{}}, std::string("h1")};
  s.side.receive(known);
  REQUIRE(s.sent.size() == 2);
  const auto& k = std::get<msg::SpawnKnown>(s.sent[1]);
  CHECK(k.nspace == "dl-x.spawn1");
  CHECK(k.error == std::optional<std::string>("no MPI job runs on this host"));

  known.elsewhere.reset();
  s.side.receive(known);
  CHECK(s.children_refused == std::vector<std::string>{"no MPI job runs on this host"});
  s.side.receive(msg::FenceFailed{3, "h1 (ranks 2)"});  // no fence ran here: nothing to fail
  s.side.fence_done(3, "");
  CHECK(s.sent.size() == 2);
}

TEST_CASE("mpi side: --mpi pmix gives a rank the PMIx server's variables and PMI_FD, and refuses a foreign rank",
          "[mpi]") {
  if (!MpiSide::available()) {
    WARN("built without libpmix: nothing to check");
    return;
  }
  Side s;
  s.side.prepare_pmix();
  s.side.start(section("pmix"));
  const TaskEnv t0 = s.side.task_env(0), t1 = s.side.task_env(1);
  CHECK(value(t0, "PMIX_RANK") == "0");
  CHECK(value(t1, "PMIX_RANK") == "1");
  CHECK(value(t1, "PMIX_NAMESPACE") == "dl-side-test");
  CHECK_FALSE(value(t1, "PMIX_SERVER_URI41").empty());
  // The PMI server runs too, to tell an MPICH program what is served.
  CHECK(value(t1, dl::env::kPmiFd) == std::to_string(dl::env::kRankInheritedFd));
  CHECK_THROWS_AS(s.side.task_env(7), dl::Error);
  const auto before = file_of(t0.inherit_fd);
  REQUIRE(before.second != 0);
  s.side.task_refused(0);
  s.side.task_refused(1);
  CHECK(file_of(t0.inherit_fd) != before);  // closed (its number free, or another file's by now)
}
