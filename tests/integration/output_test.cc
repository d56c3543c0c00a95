// Output under load: 16 ranks each write 5 MiB of numbered lines in chunks
// that split lines; every line must arrive whole, exactly once, in order.
#include <catch2/catch.hpp>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
constexpr int kRanks = 16;
constexpr size_t kBytesPerRank = 5u << 20;

// Line i of a rank: its numbers twice around a filler of varying length, so
// a line glued from two ranks or two places never passes the check.
std::string expected_line(int rank, long i) {
  return std::to_string(rank) + ":" + std::to_string(i) + ":" + std::string(static_cast<size_t>(i % 61), 'a' + static_cast<char>(rank)) +
         ":" + std::to_string(rank * 1000003L + i);
}

// The writer builds the same lines (see expected_line) until it has 5 MiB
// and writes them with os.write in 65537-byte pieces, which cut lines apart.
const char* kWriter = R"(
import os, sys
rank = int(os.environ["RANK"]); limit = int(sys.argv[1])
out = []; size = 0; i = 0
while size < limit:
    l = "%d:%d:%s:%d\n" % (rank, i, chr(ord("a") + rank) * (i % 61), rank * 1000003 + i)
    out.append(l); size += len(l); i += 1
data = "".join(out).encode()
for off in range(0, len(data), 65537):
    os.write(1, data[off:off + 65537])
)";

void check_lines(const std::string& out, bool tagged) {
  std::vector<long> next(kRanks, 0);
  std::vector<size_t> bytes(kRanks, 0);
  long bad = 0;
  std::string first_bad;
  size_t start = 0;
  REQUIRE(!out.empty());
  REQUIRE(out.back() == '\n');
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    std::string_view l(out.data() + start, nl - start);
    start = nl + 1;
    int rank = -1;
    if (tagged) {
      // "[r@localhost] " then the line.
      auto close = l.find("@localhost] ");
      if (l.empty() || l[0] != '[' || close == std::string_view::npos) { ++bad; first_bad = std::string(l.substr(0, 80)); continue; }
      rank = std::stoi(std::string(l.substr(1, close - 1)));
      l.remove_prefix(close + 12);
    } else {
      auto colon = l.find(':');
      if (colon == std::string_view::npos || colon == 0 || colon > 2) { ++bad; first_bad = std::string(l.substr(0, 80)); continue; }
      rank = std::stoi(std::string(l.substr(0, colon)));
    }
    if (rank < 0 || rank >= kRanks || l != expected_line(rank, next[static_cast<size_t>(rank)])) {
      if (bad++ == 0) first_bad = std::string(l.substr(0, 80));
      continue;
    }
    bytes[static_cast<size_t>(rank)] += l.size() + 1;
    ++next[static_cast<size_t>(rank)];
  }
  INFO("first bad line: " << first_bad);
  CHECK(bad == 0);
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r);
    // Exactly the writer's lines: it stops at the first line that reaches 5 MiB.
    CHECK(bytes[static_cast<size_t>(r)] >= kBytesPerRank);
    CHECK(bytes[static_cast<size_t>(r)] < kBytesPerRank + 200);
    long n = next[static_cast<size_t>(r)];
    CHECK((bytes[static_cast<size_t>(r)] - (expected_line(r, n - 1).size() + 1)) < kBytesPerRank);
  }
}

void run_writers(bool tagged) {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(kRanks)};
  if (tagged) s.argv.push_back("--tag-output");
  for (const char* a : {"/usr/bin/python3", "-c", kWriter}) s.argv.push_back(a);
  s.argv.push_back(std::to_string(kBytesPerRank));
  s.argv.push_back(m);
  RunResult r = run(s, 120);
  INFO(r.err.substr(0, 2000));
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  check_lines(r.out, tagged);
  CHECK(wait_marked_gone(m, 1).empty());
}
}  // namespace

TEST_CASE("16 ranks x 5 MiB of lines arrive whole and exactly once", "[integration][slow]") { run_writers(false); }

TEST_CASE("16 ranks x 5 MiB of lines arrive whole and exactly once, tagged", "[integration][slow]") {
  run_writers(true);
}

// A rank that stalls mid-line (here on purpose, on a loaded machine by the
// scheduler) while another rank's line comes: where dlaunch's output is a
// pipe or a file, the stalled line still arrives whole.
TEST_CASE("a line written in two pieces a second apart arrives whole when dlaunch's output is a pipe",
          "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/usr/bin/python3", "-c",
            "import os, time\n"
            "if os.environ['RANK'] == '0':\n"
            "    os.write(1, b'first half, '); time.sleep(1.5); os.write(1, b'second half\\n')\n"
            "else:\n"
            "    time.sleep(0.6); os.write(1, b'the other rank\\n')\n"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "the other rank\nfirst half, second half\n");
}

TEST_CASE("a last line without a newline is ended by dlaunch", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--tag-output", "/usr/bin/printf", "first\\nno-newline"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto ls = lines(r.out);
  std::sort(ls.begin(), ls.end());
  CHECK(ls == std::vector<std::string>{"[0@localhost] first", "[0@localhost] no-newline", "[1@localhost] first",
                                       "[1@localhost] no-newline"});
  CHECK(r.out.back() == '\n');
}

TEST_CASE("stderr of ranks reaches dlaunch's stderr, stdout its stdout", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--tag-output", "/bin/sh", "-c", "echo out-$RANK; echo err-$RANK >&2"};
  RunResult r = run(s);
  REQUIRE(r.code == 0);
  auto out = lines(r.out), err = lines(r.err);
  std::sort(out.begin(), out.end());
  std::sort(err.begin(), err.end());
  CHECK(out == std::vector<std::string>{"[0@localhost] out-0", "[1@localhost] out-1"});
  CHECK(err == std::vector<std::string>{"[0@localhost] err-0", "[1@localhost] err-1"});
}

TEST_CASE("dlaunch --output-filename writes one stdout and stderr file per rank", "[integration]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/out";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--output-filename", dir, "/bin/sh", "-c", "echo out-$RANK; echo err-$RANK >&2"};
  RunResult r = run(s);
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());
  for (int rank = 0; rank < 3; ++rank) {
    const std::string d = dir + "/rank." + std::to_string(rank);
    CHECK(read_file(d + "/stdout") == "out-" + std::to_string(rank) + "\n");
    CHECK(read_file(d + "/stderr") == "err-" + std::to_string(rank) + "\n");
  }
}

// A disk that fills up under --output-filename (a 64 KiB tmpfs): each rank's
// file stops at the limit, dlaunch says once per file which rank, which file
// and why, the rest goes to the console, and the job ends as its ranks did.
TEST_CASE("dlaunch --output-filename on a disk that fills up: said once per file, the rest on the console, the job goes on",
          "[integration]") {
  if (::geteuid() != 0) {
    WARN("needs root to mount a small tmpfs");
    return;
  }
  TempDir tmp;
  const std::string mnt = tmp.path + "/small";
  REQUIRE(std::system(("mkdir -p " + mnt + " && mount -t tmpfs -o size=64k tmpfs " + mnt).c_str()) == 0);
  struct Unmount {
    std::string path;
    ~Unmount() { (void)std::system(("umount " + path).c_str()); }
  } unmount{mnt};
  RunSpec s;
  // 2 ranks x 80,000 bytes of numbered lines: more than the 64 KiB disk holds.
  s.argv = {bin("dlaunch"), "-n", "2", "--output-filename", mnt + "/out", "/bin/sh", "-c",
            "i=0; while [ $i -lt 1000 ]; do printf 'rank-%s-line-%04d-%060d\\n' $RANK $i 0; i=$((i+1)); done"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = mnt + "/out/rank." + std::to_string(rank) + "/stdout";
    const std::string written = read_file(file);
    const std::string last = "rank-" + std::to_string(rank) + "-line-0999-";
    // The last line did not fit in the file: it is on the console, and the file's failure was said once.
    CHECK(written.find(last) == std::string::npos);
    CHECK(r.out.find(last) != std::string::npos);
    const std::string said = "rank " + std::to_string(rank) + "'s stdout file " + file + " cannot be written (No space left on device)";
    CHECK(r.err.find(said) != std::string::npos);
    CHECK(r.err.find(said, r.err.find(said) + 1) == std::string::npos);
  }
  // Every line is somewhere: in its file or on the console (a chunk whose write failed may be in both).
  for (int rank = 0; rank < 2; ++rank)
    for (int i = 0; i < 1000; i += 37) {
      char line[64];
      std::snprintf(line, sizeof line, "rank-%d-line-%04d-", rank, i);
      const std::string file = read_file(mnt + "/out/rank." + std::to_string(rank) + "/stdout");
      CHECK((file.find(line) != std::string::npos || r.out.find(line) != std::string::npos));
    }
}

// Under `ulimit -f` (here 16 KiB) a file that reaches the limit is said and
// its output shown instead; dlaunch is not killed by SIGXFSZ.
TEST_CASE("dlaunch --output-filename under ulimit -f: the file that reaches the limit is said, dlaunch goes on",
          "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {"/bin/sh", "-c",
            "ulimit -f 32 && exec \"$0\" -n 1 --output-filename \"$1\" /bin/sh -c "
            "'i=0; while [ $i -lt 400 ]; do printf \"line-%04d-%060d\\\\n\" $i 0; i=$((i+1)); done'",
            bin("dlaunch"), tmp.path + "/out"};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("rank 0's stdout file") && Catch::Contains("File too large"));
  CHECK(r.out.find("line-0399-") != std::string::npos);
}

TEST_CASE("dlaunch --timestamp-output puts a time before each line", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "--timestamp-output", "--tag-output", "/bin/echo", "hello"};
  RunResult r = run(s);
  REQUIRE(r.code == 0);
  auto ls = lines(r.out);
  REQUIRE(ls.size() == 1);
  // "HH:MM:SS.mmm [0@localhost] hello"
  const std::string& l = ls[0];
  REQUIRE(l.size() == 12 + 20);
  CHECK(l[2] == ':');
  CHECK(l[5] == ':');
  CHECK(l[8] == '.');
  CHECK(l.substr(12) == " [0@localhost] hello");
}

// A reader of dlaunch's stdout that does not keep up (`dlaunch ... | less`
// left unscrolled, a slow tee): the ranks wait on their writes, the job goes
// on and every line arrives once the reader reads. Before, dlaunch's loop
// blocked in write(2): no heartbeat went out, and after --heartbeat-timeout
// the agent killed the job ("lost the agent ... connection closed") with most
// of its output gone. Here the reader sleeps 5 s against a 2 s timeout.
TEST_CASE("a reader that stalls 5 s holds the output up, and the job neither dies nor loses a line",
          "[integration][slow]") {
  RunSpec s;
  s.argv = {"/bin/bash", "-c",
            "set -o pipefail; '" + bin("dlaunch") +
                "' --heartbeat-timeout 2 -n 2 sh -c 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); "
                "echo \"line $RANK $i\"; done' | (sleep 5; cat)"};
  RunResult r = run(s, 120);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("lost the agent") == std::string::npos);
  long lines[2] = {0, 0}, last[2] = {0, 0};
  bool in_order = true, whole = true;
  size_t at = 0;
  while (at < r.out.size()) {
    size_t nl = r.out.find('\n', at);
    if (nl == std::string::npos) whole = false, nl = r.out.size() - 1;
    int rank = -1;
    long i = -1;
    if (std::sscanf(r.out.c_str() + at, "line %d %ld", &rank, &i) == 2 && (rank == 0 || rank == 1)) {
      ++lines[rank];
      in_order = in_order && i == last[rank] + 1;
      last[rank] = i;
    }
    at = nl + 1;
  }
  CHECK(lines[0] == 60000);
  CHECK(lines[1] == 60000);
  CHECK(in_order);
  CHECK(whole);
}

namespace {
// The peak resident memory of `pid` so far (VmHWM, kB); -1 when unknown.
long peak_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = -1;
  while (f >> key)
    if (key == "VmHWM:" && f >> kb) break;
  return kb;
}

// Reads `fd` until `marker` arrives (only the tail is searched: the data
// before it is counted, not kept); the bytes before it, or -1 at EOF or after `seconds`.
long count_until(int fd, const std::string& marker, double seconds) {
  std::string tail;
  long total = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) return -1;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return -1;
    total += n;
    tail.append(buf, static_cast<size_t>(n));
    if (const size_t at = tail.find(marker); at != std::string::npos)
      return total - static_cast<long>(tail.size() - at);
    if (tail.size() > marker.size()) tail.erase(0, tail.size() - marker.size());
  }
}
}  // namespace

// A rank that dumps binary data (or a '\r' bar for hours) writes no newline:
// dlaunch shows a partial line once it holds OutputSink::kMaxHeld bytes, so
// its memory stays bounded (holding the line until its newline, it reached
// 136 MB here, and 824 MB for 400 MiB).
TEST_CASE("a rank writing 64 MiB without a newline leaves dlaunch's memory bounded and every byte arrives",
          "[integration][slow]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "/usr/bin/python3", "-c",
            "import os, sys\nfor _ in range(64): os.write(1, b'x' * 2**20)\n"
            "os.write(1, b'\\nEND-' + sys.argv[1].encode() + b'\\n')\nsys.stdin.read()",
            m};
  s.stdin_hold = true;  // the rank waits on it: dlaunch still runs when its peak is read
  Child c = start(s);
  ChildGuard guard{c, m};
  const long before = count_until(c.out_fd, "END-" + m, 120);
  const long kb = peak_kb(c.pid);
  ::close(c.in_fd), c.in_fd = -1;
  RunResult r = wait(c, 60);
  INFO(r.err);
  CHECK(before == (64L << 20) + 1);  // the x's and the '\n' that ended them
  CHECK(kb > 0);
  CHECK(kb < 32 * 1024);
  CHECK(r.code == 0);
}

TEST_CASE("a carriage-return progress line reaches the console while the rank runs, tagged, and goes on on its line",
          "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "--tag-output", "/usr/bin/python3", "-c",
            "import sys\nsys.stdout.write('\\r 10%'); sys.stdout.flush()\nsys.stdin.read()\nprint(' done')"};
  s.stdin_hold = true;  // the rank waits for its EOF, sent once the line was seen
  Child c = start(s);
  ChildGuard guard{c, ""};
  std::string got;
  const bool seen = read_fd_until(c.out_fd, got, " 10%", 20);
  ::close(c.in_fd), c.in_fd = -1;
  RunResult r = wait(c, 30);
  INFO(r.err);
  CHECK(seen);
  CHECK(got + r.out == "\r[0@localhost]  10% done\n");
  CHECK(r.code == 0);
}
