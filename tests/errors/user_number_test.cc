// Numbers a user types (errors/user_number.h): finite, bounded, whole.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "errors/user_number.h"

using dl::parse_number;
using dl::parse_seconds;

namespace {
std::string error_of(const std::string& text, const char* zero_means = nullptr) {
  try {
    parse_seconds("--wait", text, dl::kMaxWaitSeconds, zero_means);
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("seconds: positive finite values up to the bound are taken as written", "[errors]") {
  CHECK(parse_seconds("--wait", "10", 100) == 10);
  CHECK(parse_seconds("--wait", "0.25", 100) == 0.25);
  CHECK(parse_seconds("--wait", "1e2", 100) == 100);
  CHECK(parse_seconds("--wait", "0", 100, "none") == 0);
  CHECK(parse_seconds("--timeout", "31622400", dl::kMaxJobSeconds, "no timeout") == dl::kMaxJobSeconds);
}

TEST_CASE("seconds: nan, inf, huge, negative, zero and junk are refused naming the option and the bound",
          "[errors]") {
  const std::string range = "--wait takes seconds: a number above 0 and at most 1000000 (11.6 days)";
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e10", "1000000.5", "1e400", "-1", "0",
                          "", "10s", " 10", "10 ", "0x", "1e-400"})
    CHECK(error_of(bad) == range + ", got '" + bad + "'");
  CHECK(error_of("-1", "none") == range + ", or 0 (none), got '-1'");
  CHECK(error_of("nan", "none") == range + ", or 0 (none), got 'nan'");
}

TEST_CASE("seconds: every bound fits the conversions the options go through", "[errors]") {
  // Heartbeats, grace and stack timeouts travel as int milliseconds.
  CHECK(dl::kMaxWaitSeconds * 1000 < 2147483647.0);
  // A --timeout deadline is a steady_clock time point in nanoseconds.
  CHECK(dl::kMaxJobSeconds * 1e9 < 9.2e18);
}

TEST_CASE("numbers: finite, above the floor, at most the ceiling", "[errors]") {
  CHECK(parse_number("-f", "2", 1, 1024) == 2);
  CHECK(parse_number("-f", "1024", 1, 1024) == 1024);
  CHECK_THROWS_WITH(parse_number("-f", "1", 1, 1024), "-f takes a number above 1 and at most 1024, got '1'");
  CHECK_THROWS_WITH(parse_number("-f", "nan", 1, 1024), "-f takes a number above 1 and at most 1024, got 'nan'");
  CHECK_THROWS_WITH(parse_number("-f", "inf", 1, 1024), "-f takes a number above 1 and at most 1024, got 'inf'");
  CHECK_THROWS_WITH(parse_number("-f", "3x", 1, 1024), "-f takes a number above 1 and at most 1024, got '3x'");
}
