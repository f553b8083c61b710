#pragma once
// The planners hetrl-plan offers, as one table: each one's name, a line for --help, the
// settings it takes, and how it runs. hetrl-plan's help text and flag checks and the benchmarks
// read it; nothing else lists planners.
//
// One time budget: a request's time limit covers the whole run. `ilp` gives hybrid (its warm
// start) at most kWarmStartShare of it and the ILP what is left; `auto` runs the baselines
// first, within kBaselineShare of it together (each stops with its best plan at its deadline,
// which matters only on clusters of tens of thousands of GPUs), and gives hybrid what they
// left. Each result's summary says how the time was spent.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "ilp/solver.h"
#include "planner/hybrid.h"
#include "planner/planner.h"

namespace hetrl::planner {

// What a user may set; a planner takes some of them.
enum class Setting : unsigned {
  kTimeLimit = 1u << 0,
  kSeed = 1u << 1,
  kGoal = 1u << 2,       // objective, budget, minimum throughput
  kMaxGroups = 1u << 3,
  kSolver = 1u << 4,     // the ILP solver's gap, threads, log, model export
};

struct PlanRequest {
  Goal goal;
  double time_limit = kDefaultTimeLimit;  // seconds, for the whole run
  std::uint64_t seed = 1;
  int max_groups = 3;
  ilp::SolveParams solver;  // gap, threads, log (its time limit is set from time_limit)
  std::string export_lp;
  std::string export_mps;
  std::function<void(const SearchProgress&)> progress;  // hybrid's, for people watching
};

// What a planner is, for those who compare them (the benchmarks run the baselines and the
// searches; `auto` only combines them and `exhaustive` refuses all but small instances).
enum class PlannerKind { kSearch, kBaseline, kCombined, kGroundTruth };

struct PlannerEntry {
  std::string_view name;
  std::string_view description;  // one line
  PlannerKind kind = PlannerKind::kSearch;
  unsigned settings = 0;         // Setting bits it takes
  PlannerResult (*run)(const cost::CostModel& model, const workload::ModelCatalog& models,
                       const PlanRequest& request, const core::Clock& clock);

  bool takes(Setting s) const { return (settings & static_cast<unsigned>(s)) != 0; }
};

// The share of the time limit `ilp` gives hybrid for its warm start.
inline constexpr double kWarmStartShare = 0.25;
// The most of the time limit `auto`'s baselines take together.
inline constexpr double kBaselineShare = 0.5;

std::span<const PlannerEntry> planner_table();
// nullptr when there is no such planner.
const PlannerEntry* find_planner(std::string_view name);
std::vector<std::string> planner_names();
// "the hybrid, ilp and auto planners", "the ilp planner": those that take a setting, for
// messages.
std::string planners_taking(Setting setting);

}  // namespace hetrl::planner
