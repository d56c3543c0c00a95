// Loading a library on first use (wire/shared_library.h): the first
// candidate that loads wins, every failure is kept in order.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include "wire/shared_library.h"

using namespace dl::wire;

TEST_CASE("shared library: the first candidate that loads, each failure before it said", "[wire]") {
  const auto lib = open_shared_library({"libdlaunch-no-such.so.9", "", "libm.so.6"}, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib.handle != nullptr);
  CHECK(lib.name == "libm.so.6");
  REQUIRE(lib.errors.size() == 1);  // the empty candidate is skipped, not tried
  CHECK_THAT(lib.errors[0], Catch::Contains("libdlaunch-no-such.so.9"));
  CHECK(::dlsym(lib.handle, "cos") != nullptr);
  CHECK(shared_library_loaded("libm.so.6"));
}

TEST_CASE("shared library: none loads: no handle, every loader message", "[wire]") {
  const auto lib = open_shared_library({"libdlaunch-no-such.so.1", "/nonexistent/libdlaunch-no-such.so.2"}, RTLD_NOW);
  CHECK(lib.handle == nullptr);
  CHECK(lib.name.empty());
  REQUIRE(lib.errors.size() == 2);
  CHECK_THAT(lib.why(), Catch::Contains("libdlaunch-no-such.so.1") && Catch::Contains("; ") &&
                            Catch::Contains("/nonexistent/libdlaunch-no-such.so.2"));
  CHECK_FALSE(shared_library_loaded("libdlaunch-no-such.so.1"));
  CHECK(open_shared_library({}, RTLD_NOW).why().empty());
}
