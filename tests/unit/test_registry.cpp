// The planner table: what hetrl-plan's help, flag checks and the benchmarks read.

#include <doctest/doctest.h>

#include <set>

#include "core/clock.h"
#include "fixtures.h"
#include "planner/registry.h"

using namespace hetrl;

namespace {

using testing::catalogs;
using Instance = testing::FileInstance;

// `name` as hetrl-plan runs it with --time-limit `limit` (40 s unless told), reading `clock`.
planner::PlannerResult run_within(const char* name, const Instance& x, const core::Clock& clock, double limit = 40) {
  planner::PlanRequest request;
  request.time_limit = limit;
  return planner::find_planner(name)->run(x.model, catalogs().models, request, clock);
}

}  // namespace

TEST_CASE("the planner table: unique names, each found by name, settings phrased for messages") {
  std::set<std::string> names;
  for (const planner::PlannerEntry& p : planner::planner_table()) {
    CHECK(names.insert(std::string(p.name)).second);
    CHECK(planner::find_planner(p.name) == &p);
    CHECK_FALSE(p.description.empty());
  }
  CHECK(planner::find_planner("magic") == nullptr);
  CHECK(planner::planner_names().front() == "hybrid");
  CHECK(planner::planners_taking(planner::Setting::kSolver) == "the ilp planner");
  CHECK(planner::planners_taking(planner::Setting::kSeed) == "the hybrid, ilp and auto planners");
  CHECK_FALSE(planner::find_planner("verl")->takes(planner::Setting::kTimeLimit));
}

TEST_CASE("every planner of the table runs as hetrl-plan runs it and names itself in its plan") {
  const Instance sync("small3.json", "grpo_tiny.json");
  const Instance async("small3.json", "grpo_tiny_async.json");
  const core::FakeClock clock;
  for (const planner::PlannerEntry& p : planner::planner_table()) {
    CAPTURE(p.name);
    // verl-async plans one-step off-policy training only.
    const Instance& x = p.name == "verl-async" ? async : sync;
    const planner::PlannerResult r = p.run(x.model, catalogs().models, {}, clock);
    REQUIRE(r.found);
    CHECK(r.stop == planner::Stop::kComplete);
    if (p.name == "auto") {
      CHECK(r.plan.planner.params.front().first == "chosen_by");
    } else {
      CHECK(r.plan.planner.name == p.name);
    }
  }
}

TEST_CASE("auto ranks by the goal: under the cost objective it returns the cheapest plan per sample") {
  const Instance x("small3.json", "grpo_tiny.json");
  const core::FakeClock clock;
  planner::PlanRequest request;
  request.goal.objective = planner::Objective::kCostPerSample;
  const planner::PlannerResult chosen = planner::find_planner("auto")->run(x.model, catalogs().models, request, clock);
  REQUIRE(chosen.found);
  for (const char* name : {"hybrid", "verl", "streamrl", "homogeneous"}) {
    const planner::PlannerResult r = planner::find_planner(name)->run(x.model, catalogs().models, request, clock);
    if (!r.found) continue;
    CAPTURE(name);
    CHECK(*chosen.prediction.dollars_per_sample() <= *r.prediction.dollars_per_sample());
  }
}

TEST_CASE("auto's baselines stop at their share of the time limit and hybrid has the rest") {
  const Instance x("small3.json", "grpo_tiny.json");
  // One second per look at the clock: the baselines' 20 s of a 40 s limit run out.
  const core::FakeClock clock(1.0);
  const planner::PlannerResult r = run_within("auto", x, clock);
  REQUIRE(r.found);
  CHECK(r.summary.find("verl") != std::string::npos);
  CHECK(r.summary.find("(stopped at its share)") != std::string::npos);
  CHECK(r.summary.find("hybrid") != std::string::npos);
  // Without a clock that moves, nothing stops early, and the baselines evaluate more.
  const core::FakeClock still;
  const planner::PlannerResult full = run_within("auto", x, still);
  CHECK(full.summary.find("(stopped at its share)") == std::string::npos);
  CHECK(r.evaluations < full.evaluations);
}

TEST_CASE("a time limit that passes before any plan is found is the reason given, with the whole limit") {
  const Instance x("small3.json", "grpo_tiny.json");
  for (const char* name : {"hybrid", "ilp", "auto"}) {
    CAPTURE(name);
    // One second per look at the clock, and half a second to plan.
    const core::FakeClock clock(1.0);
    const planner::PlannerResult r = run_within(name, x, clock, 0.5);
    CHECK_FALSE(r.found);
    CHECK(r.stop == planner::Stop::kTimeLimit);
    CHECK(r.why_not.find("the time limit of 0.5 s passed before a plan was found") == 0);
  }
}

TEST_CASE("ilp gives hybrid a share of the time limit and itself the rest, and says so") {
  const Instance x("small3.json", "grpo_tiny.json");
  // One second per look at the clock: hybrid's share of a 40 s limit (10 s) runs out first.
  const core::FakeClock clock(1.0);
  const planner::PlannerResult r = run_within("ilp", x, clock);
  CHECK(r.summary.find("hybrid (warm start): ") == 0);
  CHECK(r.summary.find("of the 40 s limit") != std::string::npos);
  const double hybrid_seconds = r.run_stat("warm_start_seconds").value_or(-1);
  CHECK(hybrid_seconds >= 10);
  CHECK(hybrid_seconds < 40);
  CHECK(r.plan.planner.params.front() == std::pair<std::string, std::string>{"time_limit", "40"});
}
