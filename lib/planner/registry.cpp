#include "planner/registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/baselines.h"
#include "planner/exhaustive.h"
#include "planner/ilp_planner.h"

namespace hetrl::planner {
namespace {

constexpr unsigned bits(std::initializer_list<Setting> settings) {
  unsigned out = 0;
  for (Setting s : settings) out |= static_cast<unsigned>(s);
  return out;
}

HybridParams hybrid_params(const PlanRequest& request, double time_limit) {
  HybridParams params;
  params.seed = request.seed;
  params.space.max_groups = request.max_groups;
  params.goal = request.goal;
  params.time_limit = time_limit;
  return params;
}

PlannerResult run_hybrid(const cost::CostModel& model, const workload::ModelCatalog& models,
                         const PlanRequest& request, const core::Clock& clock) {
  return plan_hybrid(model, models, hybrid_params(request, request.time_limit), clock, request.progress);
}

PlannerResult run_ilp(const cost::CostModel& model, const workload::ModelCatalog& models,
                      const PlanRequest& request, const core::Clock& clock) {
  IlpParams params;
  params.space.max_groups = request.max_groups;
  params.goal = request.goal;
  if (std::optional<std::string> why = ilp_refusal(model, params)) {  // before the warm start's search
    PlannerResult refused;
    refused.stop = Stop::kRefused;
    refused.why_not = std::move(*why);
    return refused;
  }
  // Hybrid's plan, under the same goal, warm-starts and bounds the ILP.
  const double start = clock.seconds();
  const PlannerResult warm = plan_hybrid(model, models, hybrid_params(request, request.time_limit * kWarmStartShare),
                                         clock, request.progress);
  const double hybrid_seconds = clock.seconds() - start;
  params.solve = request.solver;
  params.solve.time_limit = std::max(0.0, request.time_limit - hybrid_seconds);
  params.export_lp = request.export_lp;
  params.export_mps = request.export_mps;
  IlpOutcome outcome = plan_ilp(model, models, params, clock, warm.found ? &warm.plan : nullptr);
  const std::string summary = fmt::format("hybrid (warm start): {:.2f} s of the {} s limit\n{}", hybrid_seconds,
                                          request.time_limit, ilp_summary(outcome, request.goal, "hybrid"));
  PlannerResult result = std::move(outcome.result);
  if (!result.found && result.stop == Stop::kTimeLimit) {
    // The ILP's own message names the part of the limit hybrid left it.
    result.why_not = late_why_not(request.time_limit, fmt::format(" (hybrid's warm start {:.2f} s, the ILP's build {:.2f} s)",
                                                                  hybrid_seconds, outcome.build_seconds));
  }
  for (auto& [name, value] : result.plan.planner.params) {
    if (name == "time_limit") value = fmt::format("{}", request.time_limit);  // the whole run's
  }
  result.run_stats.emplace_back("warm_start_seconds", hybrid_seconds);
  result.summary = summary;
  return result;
}

// The best plan of hybrid and the baselines under the request's goal (hybrid's on a tie). The
// baselines run first, each until an even part of what is left of their share of the time
// limit, and hybrid gets what they leave of it.
PlannerResult run_auto(const cost::CostModel& model, const workload::ModelCatalog& models,
                       const PlanRequest& request, const core::Clock& clock) {
  require_prices(model.cluster(), request.goal);
  const double start = clock.seconds();
  const std::vector<int> nodes = all_nodes(model.cluster());
  PlannerResult results[5];  // ranked in this order: hybrid first, so it wins a tie
  std::string spent;
  const auto run = [&](std::size_t slot, const char* name, auto&& plan) {
    const double began = clock.seconds();
    results[slot] = plan();
    spent += fmt::format("{}{} {:.2f} s{}", spent.empty() ? "" : ", ", name, clock.seconds() - began,
                         slot != 0 && results[slot].stop == Stop::kTimeLimit ? " (stopped at its share)" : "");
  };
  const bool async = model.workload().staleness() >= 1;
  const double baselines_end = start + kBaselineShare * request.time_limit;
  int baselines_left = async ? 4 : 3;
  // An even part of what is left of the baselines' share, for the next one.
  const auto next_deadline = [&] {
    const double now = clock.seconds();
    return Deadline{&clock, now + std::max(0.0, baselines_end - now) / baselines_left--};
  };
  run(1, "verl", [&] { return plan_verl(model, models, nodes, next_deadline()); });
  run(2, "streamrl", [&] { return plan_streamrl(model, models, nodes, next_deadline()); });
  run(3, "homogeneous", [&] { return plan_homogeneous(model, models, next_deadline()); });
  if (async) run(4, "verl-async", [&] { return plan_verl_async(model, models, nodes, next_deadline()); });
  const double left = std::max(0.0, request.time_limit - (clock.seconds() - start));
  run(0, "hybrid", [&] { return plan_hybrid(model, models, hybrid_params(request, left), clock, request.progress); });
  PlannerResult best;
  long long evaluations = 0;
  const bool none_found = std::none_of(std::begin(results), std::end(results), [](const PlannerResult& r) { return r.found; });
  if (none_found && results[0].stop == Stop::kTimeLimit) {
    best.stop = Stop::kTimeLimit;
    best.why_not = late_why_not(request.time_limit);
  }
  for (PlannerResult& result : results) {
    evaluations += result.evaluations;
    if (result.found && request.goal.accepts(result.prediction) &&
        (!best.found || request.goal.better(result.prediction, best.prediction))) {
      best = std::move(result);
    } else if (!best.found && best.why_not.empty()) {
      best.why_not = result.found ? "no plan meets the constraints" : result.why_not;
    }
  }
  best.evaluations = evaluations;
  if (best.found) best.plan.planner.params.insert(best.plan.planner.params.begin(), {"chosen_by", "auto"});
  best.summary = fmt::format("auto: {} of the {} s limit; the best plan is {}'s", spent, request.time_limit,
                             best.found ? best.plan.planner.name : "nobody");
  return best;
}

PlannerResult run_verl(const cost::CostModel& model, const workload::ModelCatalog& models, const PlanRequest&,
                       const core::Clock&) {
  return plan_verl(model, models, all_nodes(model.cluster()));
}

PlannerResult run_streamrl(const cost::CostModel& model, const workload::ModelCatalog& models,
                           const PlanRequest&, const core::Clock&) {
  return plan_streamrl(model, models, all_nodes(model.cluster()));
}

PlannerResult run_verl_async(const cost::CostModel& model, const workload::ModelCatalog& models,
                             const PlanRequest&, const core::Clock&) {
  return plan_verl_async(model, models, all_nodes(model.cluster()));
}

PlannerResult run_homogeneous(const cost::CostModel& model, const workload::ModelCatalog& models,
                              const PlanRequest&, const core::Clock&) {
  return plan_homogeneous(model, models);
}

PlannerResult run_exhaustive(const cost::CostModel& model, const workload::ModelCatalog& models,
                             const PlanRequest& request, const core::Clock&) {
  ExhaustiveParams params;
  params.goal = request.goal;
  return plan_exhaustive(model, models, params);
}

constexpr unsigned kSearchSettings = bits({Setting::kTimeLimit, Setting::kSeed, Setting::kGoal, Setting::kMaxGroups});

using enum PlannerKind;

const PlannerEntry kPlanners[] = {
    {"hybrid", "multi-level search with successive halving (the default)", kSearch, kSearchSettings, run_hybrid},
    {"ilp", "the same space as an integer linear program solved by CBC (provably best), warm-started from hybrid",
     kSearch, kSearchSettings | bits({Setting::kSolver}), run_ilp},
    {"auto", "the best plan of hybrid and the baselines", kCombined, kSearchSettings, run_auto},
    {"verl", "every task colocated on all GPUs, one strategy, even batch split", kBaseline, 0, run_verl},
    {"verl-async", "verl's one-step off-policy trainer: generation and training on disjoint pools, even split "
     "(async workloads)", kBaseline, 0, run_verl_async},
    {"streamrl", "generation and training on disjoint pools, batch split by speed", kBaseline, 0, run_streamrl},
    {"homogeneous", "the best plan on the nodes of a single GPU type", kBaseline, 0, run_homogeneous},
    {"exhaustive", "every grouping, allocation and strategy: ground truth for small instances", kGroundTruth,
     bits({Setting::kGoal}), run_exhaustive},
};

}  // namespace

std::span<const PlannerEntry> planner_table() { return kPlanners; }

const PlannerEntry* find_planner(std::string_view name) {
  for (const PlannerEntry& p : kPlanners) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> planner_names() {
  std::vector<std::string> out;
  for (const PlannerEntry& p : kPlanners) out.emplace_back(p.name);
  return out;
}

std::string planners_taking(Setting setting) {
  std::vector<std::string_view> names;
  for (const PlannerEntry& p : kPlanners) {
    if (p.takes(setting)) names.push_back(p.name);
  }
  std::string out = "the ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : (i + 1 == names.size() ? " and " : ", "), names[i]);
  }
  return out + (names.size() == 1 ? " planner" : " planners");
}

}  // namespace hetrl::planner
