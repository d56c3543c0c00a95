#include <catch2/catch.hpp>

#include "errors/error.h"
#include "hostfiles/hostfile.h"

using namespace dl::hostfiles;

namespace {
template <typename F>
std::string parse_error_of(F&& f) {
  try {
    f();
  } catch (const dl::ParseError& e) {
    return e.what();
  }
  return "(no ParseError)";
}
std::string file_error(std::string_view text) {
  return parse_error_of([&] { parse_hostfile_text(text, "hosts"); });
}
std::string list_error(std::string_view list) {
  return parse_error_of([&] { parse_host_list(list); });
}
}  // namespace

TEST_CASE("malformed hostfile lines give file:line:col, what was expected and what came", "[hostfiles]") {
  struct Case {
    const char* text;
    const char* message;
  };
  const std::string port_hint =
      "expected nothing after 'host:N' (N is MPICH's slot count; for an ssh port or an IPv6 address use brackets: "
      "'[host]:port', '[::1]:port'), got ";
  const Case cases[] = {
      {"a\nb\nnode slots=four\n", "hosts:3:12: 'slots=' needs a positive number, got 'four'"},
      {"node1 slot=4", "hosts:1:7: expected slots=, max_slots= or port=, got 'slot=4' (did you mean 'slots='?)"},
      {"node1 cpus=4", "hosts:1:7: expected slots=, max_slots= or port=, got 'cpus=4'"},
      {"node1 slots=4 max_slots=2", "hosts:1:25: 'max_slots=' must be at least slots (4), got '2'"},
      {"node1 max_slots=x", "hosts:1:17: 'max_slots=' needs a positive number, got 'x'"},
      {"node1 slots=0", "hosts:1:13: 'slots=' needs a positive number, got '0'"},
      {"node1 slots=-2", "hosts:1:13: 'slots=' needs a positive number, got '-2'"},
      {"node1 slots=", "hosts:1:13: 'slots=' needs a positive number, got ''"},
      {"node1\tslots=x", "hosts:1:13: 'slots=' needs a positive number, got 'x'"},
      {"node1 slots=2 slots=3", "hosts:1:15: expected slots once per line, got a second 'slots=3'"},
      {"node1:2 slots=3", "hosts:1:9: expected slots once per line, got a second 'slots=3'"},
      {"[n1]:22 port=23", "hosts:1:9: expected the port once per line, got a second 'port=23'"},
      {"node1 4", "hosts:1:7: expected key=value (slots=N, max_slots=N or port=N) after the host, got '4'"},
      {"node[5-2]", "hosts:1:6: expected a range whose end is not below its start, got '5-2' (write '2-5')"},
      {"node[1-3 slots=2", "hosts:1:5: expected ']' to close this '[', got the end of the name"},
      {"node[a-b]", "hosts:1:6: expected a number or a range like 1-4 inside '[...]', got 'a-b'"},
      {"node[]", "hosts:1:6: expected a number or a range like 1-4 inside '[...]', got ''"},
      {"node1]", "hosts:1:6: expected a host name, got a ']' with no '[' before it"},
      {"node$1", "hosts:1:5: expected a host name (letters, digits, '-', '.', '_'), got '$' in 'node$1'"},
      {"  :4", "hosts:1:3: expected a host name before ':', got nothing"},
      {"node1:x", "hosts:1:7: 'host:N' needs a positive number, got 'x'"},
      {"node1:0", "hosts:1:7: 'host:N' needs a positive number, got '0'"},
      {"@node1", "hosts:1:1: expected a user name before '@', got nothing"},
      {"bob@", "hosts:1:5: expected a host name, got nothing"},
      {"b!b@n1", "hosts:1:2: expected a user name (letters, digits, '-', '.', '_'), got '!' in 'b!b'"},
      {"[node1]:99999", "hosts:1:9: '[host]:port' needs a port number 1-65535, got '99999'"},
      {"n1 port=0", "hosts:1:9: 'port=' needs a port number 1-65535, got '0'"},
      {"[fe80::1", "hosts:1:1: expected ']' to close this '[', got the end of the host"},
      {"[fe80::1]x", "hosts:1:10: expected ':port' or the end after '[...]', got 'x'"},
      {"[]:22", "hosts:1:2: expected a host name or address inside '[]', got nothing"},
      {"[n1]:22:0", "hosts:1:9: '[host]:port:N' needs a positive number, got '0'"},
      {"[n1]:22:4:5", "hosts:1:10: expected nothing after '[host]:port:N', got ':5'"},
      {"[fe80::1/64]", "hosts:1:9: expected an IPv6 address inside '[...]', got '/' in 'fe80::1/64'"},
      {"ok\n  fe80::1", "hosts:2:8: "},  // message checked with port_hint below
      {"node1:22:4", "hosts:1:9: "},
      {"", "hosts: no hosts in the file (only blank lines and comments); add lines like 'node1 slots=4'"},
      {"# only\n\n  # comments\n", "hosts: no hosts in the file (only blank lines and comments); add lines like "
                                   "'node1 slots=4'"},
  };
  for (const auto& c : cases) {
    INFO("hostfile text: " << c.text);
    std::string expected = c.message;
    if (expected == "hosts:2:8: ") expected += port_hint + "':1'";
    if (expected == "hosts:1:9: ") expected += port_hint + "':4'";
    CHECK(file_error(c.text) == expected);
  }
}

TEST_CASE("a comment cuts the line wherever its '#' is", "[hostfiles]") {
  auto h = parse_hostfile_text("node1 slots=2#max_slots=1\nnode2# slots=x\n", "f");
  REQUIRE(h.size() == 2);
  CHECK(h[0].slots == 2);
  CHECK(h[0].max_slots == 0);
  CHECK(h[1].slots == 1);
}

TEST_CASE("malformed -H lists name the item", "[hostfiles]") {
  CHECK(list_error("h1:2,h2:x") == "-H item 2 ('h2:x'): 'host:N' needs a positive number, got 'x'");
  CHECK(list_error("h1,,h2") ==
        "-H item 2 (''): expected a host, got nothing (two commas in a row, or one at an end)");
  CHECK(list_error("h1,") == "-H item 2 (''): expected a host, got nothing (two commas in a row, or one at an end)");
  CHECK(list_error("n[1-2],m[3-1]") ==
        "-H item 2 ('m[3-1]'): expected a range whose end is not below its start, got '3-1' (write '1-3')");
  CHECK(list_error("h1 slots=2") ==
        "-H item 1 ('h1 slots=2'): expected a host name (letters, digits, '-', '.', '_'), got ' ' in 'h1 slots=2'");
  CHECK(list_error("") == "-H: expected a comma-separated list of hosts such as 'node1:2,node2:2', got ''");
}
