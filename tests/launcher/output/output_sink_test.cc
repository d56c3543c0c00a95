#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "launcher/output/output_sink.h"

using dl::launcher::OutputOptions;
using dl::launcher::OutputSink;

namespace {
// A temporary file standing in for stdout or stderr.
struct TempFile {
  TempFile() {
    char tmpl[] = "/tmp/dl-sink-XXXXXX";
    fd = ::mkstemp(tmpl);
    path = tmpl;
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string text() const {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  int fd;
  std::string path;
};

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/dl-sink-dir-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("output: chunks split mid-line come out as whole lines", "[launcher]") {
  TempFile out, err;
  OutputSink sink(OutputOptions{}, {"h", "h"}, out.fd, err.fd);
  sink.write(0, 1, "hel");
  sink.write(1, 1, "wor");
  CHECK(out.text().empty());  // nothing half-written
  CHECK(sink.pending() == 6);
  sink.write(0, 1, "lo\nsec");
  CHECK(out.text() == "hello\n");
  sink.write(1, 1, "ld\n");
  sink.write(0, 1, "ond\nthird\n");
  CHECK(out.text() == "hello\nworld\nsecond\nthird\n");
  CHECK(sink.pending() == 0);
  CHECK(err.text().empty());
}

TEST_CASE("output: stdout and stderr are kept apart, each with its own partial line", "[launcher]") {
  TempFile out, err;
  OutputSink sink(OutputOptions{}, {"h"}, out.fd, err.fd);
  sink.write(0, 1, "o1");
  sink.write(0, 2, "e1\ne2");
  sink.write(0, 1, "\n");
  CHECK(out.text() == "o1\n");
  CHECK(err.text() == "e1\n");
  sink.finish(0);
  CHECK(err.text() == "e1\ne2\n");
}

TEST_CASE("output: tags name rank and host on every line, also when split", "[launcher]") {
  TempFile out, err;
  OutputOptions o;
  o.tag = true;
  OutputSink sink(o, {"node1", "node2"}, out.fd, err.fd);
  sink.write(1, 1, "a\nb");
  sink.write(0, 2, "x\n");
  sink.write(1, 1, "c\n\n");
  CHECK(out.text() == "[1@node2] a\n[1@node2] bc\n[1@node2] \n");
  CHECK(err.text() == "[0@node1] x\n");
}

TEST_CASE("output: finish() ends a partial last line and nothing else", "[launcher]") {
  TempFile out, err;
  OutputOptions o;
  o.tag = true;
  OutputSink sink(o, {"h"}, out.fd, err.fd);
  sink.write(0, 1, "whole\npartial");
  sink.finish(0);
  CHECK(out.text() == "[0@h] whole\n[0@h] partial\n");
  sink.finish(0);  // twice: nothing more
  CHECK(out.text() == "[0@h] whole\n[0@h] partial\n");
  CHECK(sink.pending() == 0);
}

TEST_CASE("output: timestamps come before the tag", "[launcher]") {
  TempFile out, err;
  OutputOptions o;
  o.tag = true;
  o.timestamp = true;
  OutputSink sink(o, {"h"}, out.fd, err.fd);
  sink.write(0, 1, "x\n");
  std::string t = out.text();
  REQUIRE(t.size() == 13 + 6 + 2);  // "HH:MM:SS.mmm [0@h] x\n"
  CHECK(t[2] == ':');
  CHECK(t[8] == '.');
  CHECK(t.substr(12) == " [0@h] x\n");
}

TEST_CASE("output: many lines in one chunk through a pipe, each whole", "[launcher]") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  OutputOptions o;
  o.tag = true;
  std::string expected, chunked;
  for (int i = 0; i < 200; ++i) {
    std::string l = "line " + std::to_string(i) + std::string(static_cast<size_t>(i), '.') + "\n";
    chunked += l;
    expected += "[0@h] " + l;
  }
  {
    OutputSink sink(o, {"h"}, p[1], p[1]);
    // Feed in odd-sized pieces that cut lines anywhere.
    for (size_t off = 0; off < chunked.size(); off += 37) sink.write(0, 1, std::string_view(chunked).substr(off, 37));
    sink.finish(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  CHECK(got == expected);
}

TEST_CASE("output: --output-filename writes DIR/rank.N/stdout and stderr, untagged", "[launcher]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/out";
  TempFile out, err;
  OutputOptions o;
  o.tag = true;  // files are per rank already: no tags in them
  o.dir = dir;
  {
    OutputSink sink(o, {"h", "h", "h"}, out.fd, err.fd);
    sink.write(0, 1, "zero\n");
    sink.write(2, 2, "two-err\npart");
    sink.write(2, 1, "two\n");
    sink.finish(2);
    sink.finish(0);
  }
  CHECK(slurp(dir + "/rank.0/stdout") == "zero\n");
  CHECK(slurp(dir + "/rank.2/stdout") == "two\n");
  CHECK(slurp(dir + "/rank.2/stderr") == "two-err\npart");  // the rank's bytes, nothing added
  CHECK_FALSE(std::filesystem::exists(dir + "/rank.1"));
  CHECK(out.text().empty());
  CHECK(err.text().empty());
}

// torchrun's -r/-t/--log-dir/--local-ranks-filter as routing (launcher/output/output_sink.h, route).
using dl::launcher::parse_rank_list;
using dl::launcher::parse_std_spec;
using dl::launcher::route;

namespace {
// "cf" = console and file, "c-" console only, "-f" file only, "--" nowhere.
std::string where(const OutputOptions& o, int rank, int stream) {
  auto r = route(o, rank, stream);
  return std::string(r.console ? "c" : "-") + (r.file ? "f" : "-");
}
OutputOptions torchrun(const std::string& redirects, const std::string& tee, const std::string& filter = "") {
  OutputOptions o;
  o.log_dir = "/nonexistent";
  o.redirects = parse_std_spec(redirects, "-r");
  o.tee = parse_std_spec(tee, "-t");
  o.console_ranks = parse_rank_list(filter, "--local-ranks-filter");
  return o;
}
}  // namespace

TEST_CASE("output routing: without torchrun's options every stream goes to the console only", "[launcher]") {
  OutputOptions o;
  CHECK(where(o, 0, 1) == "c-");
  CHECK(where(o, 3, 2) == "c-");
  o.dir = "/x";  // --output-filename: files instead
  CHECK(where(o, 0, 1) == "-f");
  CHECK(where(o, 3, 2) == "-f");
}

TEST_CASE("output routing: -r 3 sends both streams to files only, -t 3 to files and the console", "[launcher]") {
  auto r = torchrun("3", "0");
  CHECK(where(r, 0, 1) == "-f");
  CHECK(where(r, 1, 2) == "-f");
  auto t = torchrun("0", "3");
  CHECK(where(t, 0, 1) == "cf");
  CHECK(where(t, 1, 2) == "cf");
  auto none = torchrun("0", "0");  // --log-dir alone writes no output files, as torchrun
  CHECK(where(none, 0, 1) == "c-");
  CHECK(where(none, 0, 2) == "c-");
}

TEST_CASE("output routing: -r 1 redirects stdout only, -t 2 tees stderr only, and tee wins over redirect", "[launcher]") {
  auto r = torchrun("1", "0");
  CHECK(where(r, 0, 1) == "-f");
  CHECK(where(r, 0, 2) == "c-");
  auto t = torchrun("0", "2");
  CHECK(where(t, 0, 1) == "c-");
  CHECK(where(t, 0, 2) == "cf");
  auto both = torchrun("3", "1");  // torchrun: redirects |= tee, and the tee'd stream is shown
  CHECK(where(both, 0, 1) == "cf");
  CHECK(where(both, 0, 2) == "-f");
}

TEST_CASE("output routing: per-rank maps are keyed by local rank, unnamed local ranks get 0", "[launcher]") {
  auto o = torchrun("0:1,1:2", "0");
  o.local_ranks = {0, 1, 2, 0, 1, 2};  // two hosts, three ranks each
  CHECK(where(o, 0, 1) == "-f");
  CHECK(where(o, 0, 2) == "c-");
  CHECK(where(o, 1, 1) == "c-");
  CHECK(where(o, 1, 2) == "-f");
  CHECK(where(o, 2, 1) == "c-");
  CHECK(where(o, 2, 2) == "c-");
  CHECK(where(o, 3, 1) == "-f");  // local rank 0 of the second host
  CHECK(where(o, 4, 2) == "-f");
}

TEST_CASE("output routing: --local-ranks-filter keeps other ranks off the console, not out of their files",
          "[launcher]") {
  auto plain = torchrun("0", "0", "0,2");
  plain.log_dir.clear();
  CHECK(where(plain, 0, 1) == "c-");
  CHECK(where(plain, 1, 1) == "--");
  CHECK(where(plain, 1, 2) == "--");
  CHECK(where(plain, 2, 2) == "c-");
  auto tee = torchrun("0", "3", "0");
  CHECK(where(tee, 0, 1) == "cf");
  CHECK(where(tee, 1, 1) == "-f");
  CHECK(where(tee, 1, 2) == "-f");
  auto filtered_global = torchrun("0", "0", "3");  // global rank 3 (local rank 0 on the second host) only
  filtered_global.local_ranks = {0, 1, 2, 0};
  CHECK(where(filtered_global, 0, 1) == "--");
  CHECK(where(filtered_global, 3, 1) == "c-");
}

TEST_CASE("output routing: bad -r/-t values and filters are usage errors naming the option", "[launcher]") {
  for (const char* bad : {"4", "-1", "", "x", "1,2", "0:4", "0:", ":1", "0:1,", "a:1", "0:1;1:2", " 1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_std_spec(bad, "-r/--redirects"), Catch::Contains("-r/--redirects") && Catch::Contains("0:3"));
  }
  CHECK(parse_std_spec("2", "-t").all == 2);
  auto m = parse_std_spec("0:3,12:1", "-t");
  CHECK(m.mapped);
  CHECK(m.mask(0) == 3);
  CHECK(m.mask(12) == 1);
  CHECK(m.mask(1) == 0);
  CHECK(parse_rank_list("", "--local-ranks-filter").empty());
  CHECK(parse_rank_list("0,2,10", "--local-ranks-filter") == std::vector<int>{0, 2, 10});
  for (const char* bad : {"a", "0,", ",1", "-1", "0;1", "1 2"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_rank_list(bad, "--local-ranks-filter"), Catch::Contains("--local-ranks-filter"));
  }
}

TEST_CASE("output: -t 3 with a filter writes every rank's files, tags the console only, keeps lines whole",
          "[launcher]") {
  TempDir tmp;
  TempFile out, err;
  OutputOptions o = torchrun("1", "2", "1");
  o.log_dir = tmp.path + "/logs";
  o.tag = true;
  std::string files;  // LOG_DIR/dlaunch_<time>_<pid>/attempt_0
  {
    OutputSink sink(o, {"h", "h"}, out.fd, err.fd);
    files = sink.files_path();
    CHECK(files.rfind(o.log_dir + "/dlaunch_", 0) == 0);
    CHECK(files.size() > 10);
    CHECK(files.compare(files.size() - 10, 10, "/attempt_0") == 0);
    sink.write(0, 1, "o0\n");
    sink.write(0, 2, "e0\n");
    sink.write(1, 1, "o1 he");
    sink.write(1, 2, "e1 he");
    sink.write(1, 1, "llo\n");
    sink.write(1, 2, "llo\npart");
    sink.finish(1);
    sink.finish(0);
  }
  // stdout: redirected (files only); stderr: tee'd, but only rank 1 reaches the console.
  CHECK(out.text().empty());
  CHECK(err.text() == "[1@h] e1 hello\n[1@h] part\n");
  CHECK(slurp(files + "/rank.0/stdout") == "o0\n");
  CHECK(slurp(files + "/rank.0/stderr") == "e0\n");
  CHECK(slurp(files + "/rank.1/stdout") == "o1 hello\n");
  CHECK(slurp(files + "/rank.1/stderr") == "e1 hello\npart");
}

TEST_CASE("output: a filtered-out stream written nowhere is not held back", "[launcher]") {
  TempFile out, err;
  OutputOptions o;
  o.console_ranks = {0};
  OutputSink sink(o, {"h", "h"}, out.fd, err.fd);
  sink.write(1, 1, "no newline yet");
  CHECK(sink.pending() == 0);
  sink.finish(1);
  CHECK(out.text().empty());
}

// Partial lines: shown after kHoldFor or at kMaxHeld, never spliced with another stream's.
namespace {
const auto kDue = OutputSink::kHoldFor + std::chrono::milliseconds(1);
// A console a person watches (a terminal): partial lines are shown on time.
OutputOptions live(OutputOptions o = {}) {
  o.live[0] = o.live[1] = true;
  return o;
}
OutputOptions tagged() {
  OutputOptions o;
  o.tag = true;
  return live(o);
}
}  // namespace

TEST_CASE("output: a partial line is shown once it has waited kHoldFor, and its rest follows on that line",
          "[launcher]") {
  TempFile out, err;
  OutputSink sink(tagged(), {"h"}, out.fd, err.fd);
  sink.write(0, 1, "Loading...");
  REQUIRE(sink.next_due().has_value());
  sink.show_held(OutputSink::Clock::now());  // not yet due
  CHECK(out.text().empty());
  sink.show_held(*sink.next_due());
  CHECK(out.text() == "[0@h] Loading...");
  CHECK(sink.pending() == 0);
  CHECK_FALSE(sink.next_due().has_value());
  sink.write(0, 1, " done\nnext\n");
  CHECK(out.text() == "[0@h] Loading... done\n[0@h] next\n");
}

TEST_CASE("output: another rank's line first ends a shown partial line, whose rest gets its own tag", "[launcher]") {
  TempFile out, err;
  OutputSink sink(tagged(), {"h", "h"}, out.fd, err.fd);
  sink.write(0, 1, "50%");
  sink.show_held(OutputSink::Clock::now() + kDue);
  sink.write(1, 1, "hello\n");
  sink.write(0, 1, " and on\n");
  CHECK(out.text() == "[0@h] 50%\n[1@h] hello\n[0@h]  and on\n");
  // A partial line that has not waited long enough is held, not split.
  sink.write(0, 1, "whole ");
  sink.write(1, 1, "in between\n");
  sink.write(0, 1, "line\n");
  CHECK(out.text() == "[0@h] 50%\n[1@h] hello\n[0@h]  and on\n[1@h] in between\n[0@h] whole line\n");
}

TEST_CASE("output: a partial line waits on while other lines keep coming to its console, or the console is behind",
          "[launcher]") {
  TempFile out, err;
  OutputSink sink(tagged(), {"h", "h"}, out.fd, err.fd);
  sink.write(0, 1, "half a li");
  const auto before = OutputSink::Clock::now();
  sink.write(1, 1, "another rank's line\n");
  REQUIRE(sink.next_due().has_value());
  const auto due = *sink.next_due();
  CHECK(due >= before + OutputSink::kHoldFor);  // its wait started again
  sink.show_held(due - std::chrono::milliseconds(1));
  sink.show_held(due + std::chrono::seconds(5), true);  // behind: shown later, not now
  CHECK(out.text() == "[1@h] another rank's line\n");
  CHECK(*sink.next_due() >= due + std::chrono::seconds(5));
  sink.write(0, 1, "ne\n");
  CHECK(out.text() == "[1@h] another rank's line\n[0@h] half a line\n");
}

TEST_CASE("output: to a file or pipe a line is never cut on time, however late its rest - a redraw is shown",
          "[launcher]") {
  TempFile out, err;
  OutputOptions o;
  o.tag = true;  // not live: dlaunch's console is a log, not a terminal
  OutputSink sink(o, {"h", "h"}, out.fd, err.fd);
  const auto much_later = OutputSink::Clock::now() + std::chrono::hours(1);
  sink.write(0, 1, "9:274:jjjj");  // a rank stalled mid-write on a loaded machine
  CHECK_FALSE(sink.next_due().has_value());
  sink.show_held(much_later);
  sink.write(1, 1, "another rank's line\n");
  sink.show_held(much_later);
  sink.write(0, 1, "jjjj:9000301\nline two");
  sink.write(0, 1, "\r");  // "\r\n" cut before its '\n' is no redraw
  CHECK_FALSE(sink.next_due().has_value());
  sink.write(0, 1, "\n");
  CHECK(out.text() == "[1@h] another rank's line\n[0@h] 9:274:jjjjjjjj:9000301\n[0@h] line two\r\n");
  sink.write(1, 2, "\r 10%");  // a progress bar: shown on time wherever it goes
  REQUIRE(sink.next_due().has_value());
  sink.show_held(*sink.next_due());
  CHECK(err.text() == "\r[1@h]  10%");
  sink.write(0, 2, "half");
  CHECK_FALSE(sink.next_due().has_value());
  sink.finish(0);  // the rank's end shows what it held
  CHECK(err.text() == "\r[1@h]  10%\n[0@h] half\n");
}

TEST_CASE("output: a carriage-return progress bar shows as it goes, its tag written again after each CR", "[launcher]") {
  TempFile out, err;
  OutputSink sink(tagged(), {"h"}, out.fd, err.fd);
  sink.write(0, 2, "\r 10%");
  sink.show_held(OutputSink::Clock::now() + kDue);
  CHECK(err.text() == "\r[0@h]  10%");
  sink.write(0, 2, "\r 20%|##");
  sink.show_held(OutputSink::Clock::now() + kDue);
  sink.write(0, 2, "\r");  // a bar that ends its redraws with '\r'
  sink.show_held(OutputSink::Clock::now() + kDue);
  sink.write(0, 2, "100%\n");
  CHECK(err.text() == "\r[0@h]  10%\r[0@h]  20%|##\r[0@h] 100%\n");
  sink.write(0, 2, "a\rb\r\nc\n");  // a lone '\r' inside a line too; "\r\n" ends a line as '\n' does
  CHECK(err.text() == "\r[0@h]  10%\r[0@h]  20%|##\r[0@h] 100%\n[0@h] a\r[0@h] b\r\n[0@h] c\n");
}

TEST_CASE("output: a rank that writes no newline holds less than kMaxHeld, the rest is shown", "[launcher]") {
  TempFile out, err;
  OutputSink sink(OutputOptions{}, {"h"}, out.fd, err.fd);
  const std::string chunk(1000, 'x');
  size_t written = 0, most_held = 0;
  for (int i = 0; i < 300; ++i) {
    sink.write(0, 1, chunk);
    written += chunk.size();
    most_held = std::max(most_held, sink.pending());
  }
  CHECK(most_held < OutputSink::kMaxHeld);
  CHECK(out.text().size() == written - sink.pending());
  sink.finish(0);
  CHECK(out.text() == std::string(written, 'x') + "\n");
}

TEST_CASE("output: stdout and stderr on one terminal share its line, on two files they do not", "[launcher]") {
  {
    TempFile tty;  // both streams to one file: one cursor
    OutputSink sink(live(), {"h"}, tty.fd, tty.fd);
    sink.write(0, 1, "prompt> ");
    sink.show_held(OutputSink::Clock::now() + kDue);
    sink.write(0, 2, "warning\n");
    CHECK(tty.text() == "prompt> \nwarning\n");
  }
  TempFile out, err;
  OutputSink sink(live(), {"h"}, out.fd, err.fd);
  sink.write(0, 1, "prompt> ");
  sink.show_held(OutputSink::Clock::now() + kDue);
  sink.write(0, 2, "warning\n");
  sink.write(0, 1, "answer\n");
  CHECK(out.text() == "prompt> answer\n");
  CHECK(err.text() == "warning\n");
}

TEST_CASE("output: finish and finish_all end a shown partial line once", "[launcher]") {
  TempFile out, err;
  OutputSink sink(tagged(), {"h", "h"}, out.fd, err.fd);
  sink.write(0, 1, "shown");
  sink.show_held(OutputSink::Clock::now() + kDue);
  sink.write(1, 2, "held");
  sink.finish(0);
  sink.finish(0);
  CHECK(out.text() == "[0@h] shown\n");
  sink.finish_all();  // (a lost host: no exit came for rank 1)
  CHECK(err.text() == "[1@h] held\n");
  CHECK(sink.pending() == 0);
}

TEST_CASE("output: files get the rank's bytes unchanged and at once, partial lines included", "[launcher]") {
  TempDir tmp;
  TempFile out, err;
  OutputOptions o;
  o.dir = tmp.path + "/out";
  OutputSink sink(o, {"h"}, out.fd, err.fd);
  sink.write(0, 1, "\r10%");
  CHECK(slurp(o.dir + "/rank.0/stdout") == "\r10%");
  CHECK(sink.pending() == 0);  // nothing held for a file
  sink.write(0, 1, "\r20%");
  sink.finish(0);
  CHECK(slurp(o.dir + "/rank.0/stdout") == "\r10%\r20%");
}

TEST_CASE("output: make_files empties every rank's files up front, 0600 in directories 0700", "[launcher]") {
  TempDir tmp;
  TempFile out, err;
  OutputOptions o;
  o.dir = tmp.path + "/out";
  std::filesystem::create_directories(o.dir + "/rank.1");
  { std::ofstream(o.dir + "/rank.1/stdout") << "an earlier run's output\n"; }
  ::chmod((o.dir + "/rank.1/stdout").c_str(), 0644);
  {
    OutputSink sink(o, {"h", "h"}, out.fd, err.fd);
    sink.make_files({0, 1});
    CHECK(slurp(o.dir + "/rank.1/stdout").empty());  // rank 1 writes nothing this time
    sink.write(0, 1, "one\n");
    sink.write(0, 1, "two\n");
  }
  CHECK(slurp(o.dir + "/rank.0/stdout") == "one\ntwo\n");
  for (const std::string f : {"/rank.0/stdout", "/rank.0/stderr", "/rank.1/stdout", "/rank.1/stderr"}) {
    struct stat st {};
    REQUIRE(::stat((o.dir + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  for (const std::string d : {"/rank.0"}) {  // (out and rank.1 were made above, 0755)
    struct stat st {};
    REQUIRE(::stat((o.dir + d).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
  }
}

TEST_CASE("output: make_files refuses a planted link with a usage error naming the option and path", "[launcher]") {
  TempDir tmp;
  TempFile out, err, victim;
  { std::ofstream(victim.path) << "precious\n"; }
  OutputOptions o;
  o.log_dir = tmp.path + "/logs";
  o.redirects = dl::launcher::parse_std_spec("3", "-r");
  OutputSink sink(o, {"h"}, out.fd, err.fd);
  const std::string files = sink.files_path();  // this run's directory, made 0700
  std::filesystem::create_directories(files + "/rank.0");
  std::filesystem::create_symlink(victim.path, files + "/rank.0/stderr");
  CHECK_THROWS_WITH(sink.make_files({0}), Catch::Contains("--log-dir") && Catch::Contains("rank.0/stderr") &&
                                               Catch::Contains("symbolic link"));
  CHECK(victim.text() == "precious\n");
}
