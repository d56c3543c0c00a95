// The job's phases only move along the diagram in launcher/job_phase.h:
// every step it draws is allowed, every other pair of phases (staying put
// included) is a bug that JobPhase::to refuses loudly.
#include <catch2/catch.hpp>

#include <set>
#include <utility>

#include "launcher/job_phase.h"

using dl::launcher::JobPhase;
using dl::launcher::Phase;
using dl::launcher::phase_name;
using dl::launcher::phase_step_allowed;

namespace {
const Phase kAll[] = {Phase::kStarting, Phase::kAborting, Phase::kLaunched,
                      Phase::kTearingDown, Phase::kRestarting, Phase::kClosing, Phase::kDone};

// The diagram's arrows, written out independently of phase_step_allowed.
const std::set<std::pair<Phase, Phase>> kArrows = {
    {Phase::kStarting, Phase::kLaunched},    {Phase::kStarting, Phase::kAborting},
    {Phase::kStarting, Phase::kDone},        {Phase::kAborting, Phase::kDone},
    {Phase::kLaunched, Phase::kTearingDown}, {Phase::kLaunched, Phase::kClosing},
    {Phase::kLaunched, Phase::kDone},        {Phase::kTearingDown, Phase::kClosing},
    {Phase::kTearingDown, Phase::kDone},     {Phase::kClosing, Phase::kDone},
    {Phase::kTearingDown, Phase::kRestarting}, {Phase::kRestarting, Phase::kLaunched},
    {Phase::kRestarting, Phase::kClosing},
};

// A JobPhase standing at `p`, reached along the diagram's arrows.
JobPhase at(Phase p) {
  JobPhase j;
  switch (p) {
    case Phase::kStarting: break;
    case Phase::kAborting: j.to(Phase::kAborting); break;
    case Phase::kLaunched: j.to(Phase::kLaunched); break;
    case Phase::kTearingDown: j.to(Phase::kLaunched), j.to(Phase::kTearingDown); break;
    case Phase::kRestarting: j.to(Phase::kLaunched), j.to(Phase::kTearingDown), j.to(Phase::kRestarting); break;
    case Phase::kClosing: j.to(Phase::kLaunched), j.to(Phase::kClosing); break;
    case Phase::kDone: j.to(Phase::kDone); break;
  }
  REQUIRE(j.now() == p);
  return j;
}
}  // namespace

TEST_CASE("job phase: starts at starting", "[launcher][phase]") {
  JobPhase j;
  CHECK(j.now() == Phase::kStarting);
  CHECK(j.is(Phase::kStarting));
  CHECK_FALSE(j.is(Phase::kLaunched));
}

TEST_CASE("job phase: every arrow of the diagram is allowed, all 49 pairs checked", "[launcher][phase]") {
  int pairs = 0, allowed = 0;
  for (Phase from : kAll) {
    for (Phase to : kAll) {
      ++pairs;
      const bool arrow = kArrows.count({from, to}) == 1;
      INFO(phase_name(from) << " -> " << phase_name(to));
      CHECK(phase_step_allowed(from, to) == arrow);
      JobPhase j = at(from);
      if (arrow) {
        ++allowed;
        CHECK_NOTHROW(j.to(to));
        CHECK(j.now() == to);
      } else {
        // A refused step names both phases, and the phase stays where it was.
        CHECK_THROWS_MATCHES(j.to(to), std::logic_error,
                             Catch::Message(std::string("job phase cannot go from ") + phase_name(from) + " to " +
                                            phase_name(to)));
        CHECK(j.now() == from);
      }
    }
  }
  CHECK(pairs == 49);
  CHECK(allowed == 13);
}

TEST_CASE("job phase: staying put is not a step, and done is final", "[launcher][phase]") {
  for (Phase p : kAll) {
    INFO(phase_name(p));
    JobPhase j = at(p);
    CHECK_THROWS_AS(j.to(p), std::logic_error);
  }
  JobPhase done = at(Phase::kDone);
  for (Phase p : kAll) CHECK_THROWS_AS(done.to(p), std::logic_error);
}

TEST_CASE("job phase: launched() and ending() per phase", "[launcher][phase]") {
  // launched: the ranks were sent out and the loop still runs.
  CHECK_FALSE(at(Phase::kStarting).launched());
  CHECK_FALSE(at(Phase::kAborting).launched());
  CHECK(at(Phase::kLaunched).launched());
  CHECK(at(Phase::kTearingDown).launched());
  CHECK(at(Phase::kRestarting).launched());
  CHECK(at(Phase::kClosing).launched());
  CHECK_FALSE(at(Phase::kDone).launched());
  // ending: the agents were told to leave.
  CHECK_FALSE(at(Phase::kStarting).ending());
  CHECK(at(Phase::kAborting).ending());
  CHECK_FALSE(at(Phase::kLaunched).ending());
  CHECK_FALSE(at(Phase::kTearingDown).ending());
  CHECK_FALSE(at(Phase::kRestarting).ending());
  CHECK(at(Phase::kClosing).ending());
  CHECK(at(Phase::kDone).ending());
}

TEST_CASE("job phase: names", "[launcher][phase]") {
  CHECK(std::string(phase_name(Phase::kStarting)) == "starting");
  CHECK(std::string(phase_name(Phase::kAborting)) == "aborting");
  CHECK(std::string(phase_name(Phase::kLaunched)) == "launched");
  CHECK(std::string(phase_name(Phase::kTearingDown)) == "tearing down");
  CHECK(std::string(phase_name(Phase::kRestarting)) == "restarting");
  CHECK(std::string(phase_name(Phase::kClosing)) == "closing");
  CHECK(std::string(phase_name(Phase::kDone)) == "done");
}
