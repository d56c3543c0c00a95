// torch's c10d store (docs/security.md, "torch's c10d store"): torch's
// client carries no token, so the launcher's store admits only sockets of
// the job's user. Another user's client (speaking torch 2.x's protocol, as
// torch would) gets no reply and is closed, the launcher names that user,
// and the job goes on; the same client run by the job's user is answered.
#include <catch2/catch.hpp>

#include <fstream>

#include "tests/security/other_user.h"

using namespace dl::it;

namespace {
// A torch 2.x client without torch: VALIDATE, then ADD "init/" 1; prints the
// reply's value or "closed".
const char* kClient = R"(
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
name = b"init/"
s.sendall(struct.pack("<BI", 0, 0x3C85F7CE) + bytes([4]) + struct.pack("<Q", len(name)) + name + struct.pack("<q", 1))
try:
    reply = s.recv(8)
except ConnectionResetError:
    reply = b""
print("added %d" % struct.unpack("<q", reply)[0] if len(reply) == 8 else "closed", flush=True)
)";

// The job's one rank: prints MASTER_PORT, then stays until `done` exists (60 s at most).
std::string rank_script(const std::string& done) {
  return "import os, time\nprint('port', os.environ['MASTER_PORT'], flush=True)\n"
         "until = time.time() + 60\n"
         "while not os.path.exists('" + done + "') and time.time() < until:\n    time.sleep(0.05)\n";
}
}  // namespace

TEST_CASE("c10d store: another user's torch client is closed unanswered and named and the job's own is served",
          "[security][torch]") {
  DLSEC_NEEDS_OTHER_USER();
  dl::sec::OtherUser other;
  TempDir tmp;
  const std::string client = other.dir() + "/client.py", done = tmp.path + "/done", m = new_marker();
  std::ofstream(client) << kClient;
  RunSpec job;
  job.argv = {bin("dlaunch"), "-v", "-n", "1", "/usr/bin/python3", "-c", rank_script(done), m};
  Child c = start(job);
  ChildGuard guard{c, m};
  std::string out;
  REQUIRE(read_fd_until(c.out_fd, out, "\n", 30));
  const auto at = out.find("port ");
  REQUIRE(at != std::string::npos);
  const std::string port = out.substr(at + 5, out.find('\n', at) - at - 5);

  RunSpec attack;
  attack.argv = {"/usr/bin/python3", client, port};
  RunResult theirs = run(other.as(attack), 30);
  INFO(theirs.out << theirs.err);
  CHECK_THAT(theirs.out, Catch::Contains("closed"));

  RunResult ours = run(attack, 30);  // the same bytes from the job's user: the refusal was the uid check
  INFO(ours.out << ours.err);
  CHECK_THAT(ours.out, Catch::Contains("added 1"));

  std::ofstream(done) << "";
  RunResult r = wait(c, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("c10d store: closed a connection from 127.0.0.1 of user " + other.name()));
}
