#include <catch2/catch.hpp>

#include <cstdio>

#include "errors/error.h"
#include "hostfiles/hostlist.h"

using dl::hostfiles::expand_hostlist;
using Names = std::vector<std::string>;

namespace {
// Reference expansion of prefix[lo-hi] with printf-style zero padding.
Names numbered(const std::string& prefix, int lo, int hi, int width) {
  Names out;
  for (int v = lo; v <= hi; ++v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*d", width, v);
    out.push_back(prefix + buf);
  }
  return out;
}
std::string error_of(std::string_view list) {
  try {
    expand_hostlist(list, "SLURM_JOB_NODELIST");
  } catch (const dl::ParseError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("ranges keep the zero padding of their first number", "[hostfiles]") {
  CHECK(expand_hostlist("node[01-04,07]") == Names{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("n[08-11]") == numbered("n", 8, 11, 2));
  CHECK(expand_hostlist("n[001-120]") == numbered("n", 1, 120, 3));
  CHECK(expand_hostlist("n[9-10]") == Names{"n9", "n10"});
  CHECK(expand_hostlist("n[7]") == Names{"n7"});
  CHECK(expand_hostlist("plain") == Names{"plain"});
}

TEST_CASE("several bracket groups multiply out left to right", "[hostfiles]") {
  CHECK(expand_hostlist("rack[1-2]-n[1-3]") ==
        Names{"rack1-n1", "rack1-n2", "rack1-n3", "rack2-n1", "rack2-n2", "rack2-n3"});
  CHECK(expand_hostlist("r[1,3]x[0-1].lan") == Names{"r1x0.lan", "r1x1.lan", "r3x0.lan", "r3x1.lan"});
}

TEST_CASE("Slurm node lists split only at commas outside brackets", "[hostfiles]") {
  CHECK(expand_hostlist("node[01-03],gpu5,c[1-2]") == Names{"node01", "node02", "node03", "gpu5", "c1", "c2"});
  CHECK(expand_hostlist("a[1,3-4]b,c") == Names{"a1b", "a3b", "a4b", "c"});
}

TEST_CASE("bad host lists name the list and the column", "[hostfiles]") {
  CHECK(error_of("node[5-2]") == "SLURM_JOB_NODELIST 'node[5-2]', column 6: expected a range whose end is not "
                                 "below its start, got '5-2' (write '2-5')");
  CHECK(error_of("a,,b") == "SLURM_JOB_NODELIST 'a,,b', column 3: expected a host name, got nothing (two commas "
                            "in a row, or a comma at an end)");
  CHECK(error_of("n[1-2") == "SLURM_JOB_NODELIST 'n[1-2', column 2: expected ']' to close this '[', got the end of "
                             "the name");
  CHECK(error_of("n[1-[2]]") == "SLURM_JOB_NODELIST 'n[1-[2]]', column 2: expected ']' to close this '[', got a "
                                "nested '['");
  CHECK(error_of("n[x]") == "SLURM_JOB_NODELIST 'n[x]', column 3: expected a number or a range like 1-4 inside "
                            "'[...]', got 'x'");
  CHECK(error_of("n[0-99999]").find("at most 65536 hosts") != std::string::npos);
  CHECK(error_of("n[0-999]x[0-999]").find("at most 65536 hosts") != std::string::npos);
}
