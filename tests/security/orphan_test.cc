// A client that sends its bytes and closes before its connection is
// accepted leaves an end no process owns (FIN_WAIT2, then TIME_WAIT), which
// the kernel lists as uid 0 with inode 0. Against a job of root's (these
// tests run as root) such a connection must not pass for the job's user
// (docs/security.md, "Who is at the other end"). The victim is stopped with
// SIGSTOP while another user connects, sends and closes, so that every
// accept comes after the close, as a connect flood on the other ports makes
// it come in the field; then it is continued.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;
namespace it = dl::it;
using namespace std::chrono_literals;

namespace {

// send_close.py PORT COUNT HEX: COUNT times, connects to 127.0.0.1:PORT,
// sends the bytes of HEX and closes without reading; prints "sent N".
const char* kSendClose = R"(
import socket, sys
port, count, data = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
sent = 0
for _ in range(count):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(data)
        s.close()
        sent += 1
    except OSError:
        pass
print("sent %d" % sent, flush=True)
)";

// torch 2.x's client: VALIDATE, ADD "init/" 1, SET "pwned" = "x".
const std::string kAddAndSet = "00cef7853c" "040500000000000000696e69742f0100000000000000"
                               "01050000000000000070776e6564010000000000000078";

// A torch 2.x client without torch: VALIDATE, then ADD "init/" 1; prints
// the count it was answered with, or "closed".
const char* kAdd = R"(
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(struct.pack("<BI", 0, 0x3C85F7CE) + bytes([4]) + struct.pack("<Q", 5) + b"init/" + struct.pack("<q", 1))
reply = s.recv(8)
print("added %d" % struct.unpack("<q", reply)[0] if len(reply) == 8 else "closed", flush=True)
)";

// The job's one rank: prints its MASTER_PORT, PMIx server and agent pid,
// then stays until `done` exists (60 s at most).
std::string rank_script(const std::string& done) {
  return "import os, time\n"
         "print('port', os.environ['MASTER_PORT'], os.environ.get('PMIX_SERVER_URI41', '-'), os.getppid(), flush=True)\n"
         "until = time.time() + 60\n"
         "while not os.path.exists('" + done + "') and time.time() < until:\n    time.sleep(0.05)\n";
}

// A root job of one rank, -v, its temp files in a dir of its own.
struct RootJob {
  it::TempDir tmp;
  std::string done = tmp.path + "/done", marker = it::new_marker();
  it::Child child;
  std::unique_ptr<it::ChildGuard> guard;
  std::string master_port, door;
  pid_t agent = -1;

  RootJob() {
    it::RunSpec job;
    job.set_env["TMPDIR"] = tmp.path;
    job.argv = {it::bin("dlaunch"), "-v", "-n", "1", "/usr/bin/python3", "-c", rank_script(done), marker};
    child = it::start(job);
    guard.reset(new it::ChildGuard{child, marker});
    std::string out;
    REQUIRE(it::read_fd_until(child.out_fd, out, "\n", 30));
    std::istringstream line(out.substr(out.find("port ") + 5));
    std::string uri;
    line >> master_port >> uri >> agent;
    door = uri.substr(uri.rfind(':') + 1);
  }
  it::RunResult finish() {
    std::ofstream(done) << "";
    return it::wait(child, 60);
  }
  // Temp dirs libpmix was started with (the agent's dlaunch-<pid>-<hex>;
  // not its store door's dlaunch-<pid>-store-<hex>).
  int pmix_dirs() const {
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(tmp.path)) {
      const std::string name = e.path().filename().string();
      n += name.rfind("dlaunch-", 0) == 0 && name.find("-store-") == std::string::npos &&
           name.find("-py-") == std::string::npos && name.find("stacks") == std::string::npos;
    }
    return n;
  }
};

// `victim` stopped while `other` sends `hex` to `port` `count` times and
// closes each connection; then continued.
void send_and_close_while_stopped(const OtherUser& other, pid_t victim, const std::string& port, int count,
                                  const std::string& hex) {
  const std::string tool = other.dir() + "/send_close.py";
  std::ofstream(tool) << kSendClose;
  it::RunSpec spec;
  spec.argv = {"/usr/bin/python3", tool, port, std::to_string(count), hex};
  REQUIRE(::kill(victim, SIGSTOP) == 0);
  const it::RunResult r = it::run(other.as(spec), 30);
  std::this_thread::sleep_for(100ms);  // every client end orphaned
  ::kill(victim, SIGCONT);
  INFO(r.out << r.err);
  REQUIRE(r.out.find("sent " + std::to_string(count)) != std::string::npos);
}

}  // namespace

TEST_CASE("orphaned peers: another user's send-then-close reaches nothing of a root job's c10d store",
          "[security][torch]") {
  DLSEC_NEEDS_OTHER_USER();
  REQUIRE(::geteuid() == 0);
  OtherUser other;
  RootJob job;
  send_and_close_while_stopped(other, job.child.pid, job.master_port, 20, kAddAndSet);
  // Had any been executed, "init/" would count more than the job's own client.
  std::ofstream(other.dir() + "/add.py") << kAdd;
  it::RunSpec ours;
  ours.argv = {"/usr/bin/python3", other.dir() + "/add.py", job.master_port};
  const it::RunResult mine = it::run(ours, 30);
  INFO(mine.out << mine.err);
  CHECK_THAT(mine.out, Catch::Contains("added 1"));
  const it::RunResult r = job.finish();
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("connections from 127.0.0.1 of an unknown user: only the job's user may connect") ||
                        Catch::Contains("a connection from 127.0.0.1 of an unknown user"));
}

TEST_CASE("orphaned peers: another user's send-then-close starts no libpmix behind a root job's PMIx door",
          "[security][pmix]") {
  DLSEC_NEEDS_OTHER_USER();
  REQUIRE(::geteuid() == 0);
  OtherUser other;
  RootJob job;
  REQUIRE(job.agent > 0);
  REQUIRE_FALSE(job.door.empty());
  // What a PMIx client's first message would be does not matter: nothing
  // may be read from a peer that is nobody.
  send_and_close_while_stopped(other, job.agent, job.door, 50, "00000000deadbeef");
  std::this_thread::sleep_for(300ms);
  CHECK(job.pmix_dirs() == 0);  // libpmix was never started for them
  const it::RunResult r = job.finish();
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("refused a connection to this job's PMIx port from"));
  CHECK(r.err.find("OUT-OF-RESOURCE") == std::string::npos);
}

TEST_CASE("orphaned peers: another user's send-then-close counts against a root job's pre-auth caps",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  REQUIRE(::geteuid() == 0);
  OtherUser other;
  RootJob job;
  // The launcher's other listeners: its store and its control port.
  std::vector<std::string> ports;
  for (unsigned p : dl::sec::listening_ports(job.child.pid))
    if (std::to_string(p) != job.master_port) ports.push_back(std::to_string(p));
  REQUIRE_FALSE(ports.empty());
  for (const auto& p : ports) send_and_close_while_stopped(other, job.child.pid, p, 60, "00");
  const it::RunResult r = job.finish();
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  // 60 at once from nobody: over the 16 an unknown local user may hold.
  CHECK_THAT(r.err, Catch::Contains("connections from a local user at once: it already holds 16"));
}
