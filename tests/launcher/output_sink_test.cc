#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "launcher/output_sink.h"

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
  CHECK(slurp(dir + "/rank.2/stderr") == "two-err\npart\n");
  CHECK_FALSE(std::filesystem::exists(dir + "/rank.1"));
  CHECK(out.text().empty());
  CHECK(err.text().empty());
}
