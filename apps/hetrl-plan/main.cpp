// hetrl-plan: choose a plan for an RL workload on a cluster, or predict a plan written by
// hand. With no arguments it plans the embedded default (a mixed cluster, a 7B PPO job).

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <unistd.h>

#include "common/tool.h"
#include "core/error.h"
#include "core/version.h"
#include "cost/cost_model.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "plan/evaluate.h"
#include "plan/report.h"
#include "planner/baselines.h"
#include "planner/exhaustive.h"
#include "planner/hybrid.h"
#include "planner/ilp_planner.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Planners:
  hybrid       multi-level search with successive halving (the default)
  ilp          the same space as an integer linear program solved by CBC (provably best),
               warm-started from hybrid's plan
  auto         the best plan of hybrid and the baselines
  verl         every task colocated on all GPUs, one strategy, even batch split
  streamrl     generation and training on disjoint pools, batch split by speed
  homogeneous  the best plan on the nodes of a single GPU type
  exhaustive   every grouping, allocation and strategy: ground truth for small instances

Examples:
  hetrl-plan                                      plan the embedded default
  hetrl-plan --cluster c.json --workload w.json --planner streamrl -o plan.json
  hetrl-plan evaluate --cluster c.json --workload w.json --plan plan.json --explain)";

struct Options {
  std::string planner = "hybrid";
  planner::HybridParams hybrid;
  planner::IlpParams ilp;
  bool show_progress = false;
};

planner::PlannerResult run_planner(const std::string& name, const cost::CostModel& model,
                                   const workload::ModelCatalog& models, const Options& options) {
  const std::vector<int> nodes = planner::all_nodes(model.cluster());
  if (name == "verl") return planner::plan_verl(model, models, nodes);
  if (name == "streamrl") return planner::plan_streamrl(model, models, nodes);
  if (name == "homogeneous") return planner::plan_homogeneous(model, models);
  if (name == "exhaustive") return planner::plan_exhaustive(model, models);
  if (name == "ilp") {
    // Hybrid's plan, with the same constraints, warm-starts the solver.
    const core::SteadyClock clock;
    const planner::PlannerResult start = planner::plan_hybrid(model, models, options.hybrid, clock);
    const planner::IlpOutcome outcome =
        planner::plan_ilp(model, models, options.ilp, start.found ? &start.plan : nullptr);
    const ilp::SolveResult& s = outcome.solve;
    if (!outcome.result.found) return outcome.result;  // the error says why, in one line
    const plan::Prediction& p = outcome.result.prediction;
    const std::string objective =
        options.ilp.goal.objective == planner::Objective::kCostPerSample
            ? fmt::format("objective {:.6f} $ per 1k samples (the plan evaluates to {:.6f})", s.objective,
                          p.price_per_hour.value_or(0) / 3600.0 / p.samples_per_second * 1000.0)
            : fmt::format("objective {:.6f} s per iteration (the plan evaluates to {:.6f} s)",
                          outcome.ilp_iteration_seconds, p.iteration_seconds);
    fmt::print(stderr,
               "ilp: {}; {}; bound {:.6f}; gap {:.2g}; {} nodes; {} configurations composed, {} kept; "
               "{} columns, {} rows; build {:.2f} s, solve {:.2f} s{}\n",
               ilp::status_name(s.status), objective, s.bound, s.gap, s.nodes, outcome.configs,
               outcome.kept_configs, outcome.columns, outcome.rows, outcome.build_seconds, s.seconds,
               outcome.warm_started ? "; warm-started from hybrid" : "");
    return outcome.result;
  }
  if (name == "hybrid") {
    const core::SteadyClock clock;
    bool shown = false;
    auto progress = [&](const planner::SearchProgress& p) {
      if (!options.show_progress || p.seconds < 1.0) return;
      shown = true;
      std::fprintf(stderr, "\rhybrid: round %d, %d candidates left, %lld evaluations, %.1f s   ",
                   p.round, p.candidates_left, p.evaluations, p.seconds);
    };
    planner::PlannerResult result = planner::plan_hybrid(model, models, options.hybrid, clock, progress);
    if (shown) std::fprintf(stderr, "\n");
    return result;
  }
  // auto: every planner, the best plan.
  planner::PlannerResult best;
  for (const char* each : {"hybrid", "verl", "streamrl", "homogeneous"}) {
    planner::PlannerResult result = run_planner(each, model, models, options);
    if (result.found && (!best.found || result.prediction.samples_per_second >
                                            best.prediction.samples_per_second)) {
      best = std::move(result);
    } else if (!best.found && best.why_not.empty()) {
      best.why_not = result.why_not;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plan RL post-training on a heterogeneous cluster, or predict a plan.", "hetrl-plan"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(kExamples);
  std::string cluster_path, workload_path, output, plan_path, objective = "throughput";
  bool explain = false;
  Options options;
  double budget = 0, min_throughput = 0;
  app.add_option("--cluster", cluster_path, "Cluster file (hetrl.cluster/v1); default: the embedded one");
  app.add_option("--workload", workload_path, "Workload file (hetrl.workload/v1); default: the embedded one");
  CLI::Option* planner_option =
      app.add_option("--planner", options.planner,
                     "Planner: hybrid, ilp, auto, verl, streamrl, homogeneous, exhaustive")
          ->check(CLI::IsMember({"hybrid", "ilp", "auto", "verl", "streamrl", "homogeneous", "exhaustive"}))
          ->capture_default_str();
  double time_limit = 60;
  CLI::Option* time_limit_option =
      app.add_option("--time-limit", time_limit, "Hybrid and ILP: seconds the search may take")
          ->check(CLI::PositiveNumber)->capture_default_str();
  const std::vector<CLI::Option*> ilp_options = {
      app.add_option("--gap", options.ilp.solve.relative_gap, "ILP: relative optimality gap to stop at")
          ->check(CLI::Range(0.0, 1.0))->capture_default_str(),
      app.add_option("--threads", options.ilp.solve.threads, "ILP: solver threads")
          ->check(CLI::Range(1, 256))->capture_default_str(),
      app.add_option("--export-lp", options.ilp.export_lp, "ILP: write the model as an LP file"),
      app.add_option("--export-mps", options.ilp.export_mps, "ILP: write the model as an MPS file"),
      app.add_flag("--solver-log", options.ilp.solve.log, "ILP: show CBC's own output"),
  };
  const std::vector<CLI::Option*> hybrid_options = {
      app.add_option("--seed", options.hybrid.seed, "Hybrid: the search's seed")->capture_default_str(),
      app.add_option("--objective", objective, "Hybrid and ILP: throughput, or cost (per sample)")
          ->check(CLI::IsMember({"throughput", "cost"}))->capture_default_str(),
      app.add_option("--budget-per-hour", budget, "Hybrid and ILP: the most the plan's GPUs may cost, USD per hour")
          ->check(CLI::PositiveNumber),
      app.add_option("--min-throughput", min_throughput, "Hybrid and ILP: the least samples/s a plan must reach")
          ->check(CLI::PositiveNumber),
      app.add_option("--max-groups", options.hybrid.max_groups, "Hybrid: the most groups a plan may have")
          ->check(CLI::Range(1, 8))->capture_default_str(),
  };
  app.add_option("-o,--output", output, "Write the plan (hetrl.plan/v1) here");
  app.add_flag("--explain", explain, "Show every term of every task's estimate");
  CLI::App* evaluate = app.add_subcommand("evaluate", "Predict a plan written by hand or by a planner");
  evaluate->add_option("--plan", plan_path, "The plan file (hetrl.plan/v1)")->required();
  evaluate->fallthrough();
  app.require_subcommand(0, 1);

  return apps::run_tool(app, argc, argv, [&] {
    if (evaluate->parsed() && planner_option->count() > 0) {
      apps::usage_error("--planner does not apply to 'evaluate'");
    }
    const bool searching = options.planner == "hybrid" || options.planner == "auto" || options.planner == "ilp";
    for (const CLI::Option* o : hybrid_options) {
      if (o->count() > 0 && (evaluate->parsed() || !searching)) {
        apps::usage_error(fmt::format("{} applies to the hybrid and ILP planners only", o->get_name()));
      }
    }
    if (time_limit_option->count() > 0 && (evaluate->parsed() || !searching)) {
      apps::usage_error("--time-limit applies to the hybrid and ILP planners only");
    }
    for (const CLI::Option* o : ilp_options) {
      if (o->count() > 0 && (evaluate->parsed() || options.planner != "ilp")) {
        apps::usage_error(fmt::format("{} applies to the ILP planner only", o->get_name()));
      }
    }
    options.hybrid.time_limit = time_limit;
    options.ilp.solve.time_limit = time_limit;
    options.hybrid.goal.objective = options.ilp.goal.objective =
        objective == "cost" ? planner::Objective::kCostPerSample : planner::Objective::kThroughput;
    if (budget > 0) options.hybrid.goal.budget_per_hour = options.ilp.goal.budget_per_hour = budget;
    if (min_throughput > 0) options.hybrid.goal.min_throughput = options.ilp.goal.min_throughput = min_throughput;
    options.show_progress = ::isatty(STDERR_FILENO) != 0;
    const io::Catalogs& catalogs = io::builtin_catalogs();
    const io::Inputs inputs = io::load_inputs(cluster_path, workload_path, catalogs);
    const cost::CostModel model(inputs.cluster, inputs.workload.workload, inputs.graph, catalogs.models);
    const plan::ReportContext context{inputs.workload.name, inputs.cluster, inputs.graph,
                                      inputs.workload.workload};
    plan::Plan chosen;
    if (evaluate->parsed()) {
      chosen = io::read_plan(plan_path, inputs.cluster, inputs.graph, catalogs.models);
    } else {
      const auto start = std::chrono::steady_clock::now();
      planner::PlannerResult result = run_planner(options.planner, model, catalogs.models, options);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!result.found) {
        throw core::JobError(fmt::format("no feasible plan ({} planner): {}", options.planner,
                                         result.why_not));
      }
      chosen = std::move(result.plan);
      if (options.planner == "auto") {
        chosen.planner.params.insert(chosen.planner.params.begin(), {"chosen_by", "auto"});
      }
      chosen.planner.stats.emplace_back("planning_seconds", seconds);
      fmt::print(stderr, "planned in {:.2f} s ({} evaluations)\n", seconds, result.evaluations);
    }
    chosen.cluster_hash = inputs.cluster_hash;
    chosen.workload_hash = inputs.workload_hash;
    plan::Evaluator evaluator(model);
    const plan::Prediction& prediction = evaluator.evaluate(chosen, explain);
    if (!prediction.feasible) {
      throw core::JobError("the plan does not fit: " + prediction.infeasible);
    }
    if (!output.empty()) {
      io::write_file_atomic(output, io::plan_to_json(chosen, prediction, inputs.cluster, inputs.graph));
    }
    fmt::print("{}", plan::format_plan(chosen, prediction, context, explain));
    if (!output.empty()) fmt::print("\nwrote {}\n", output);
    return apps::kExitOk;
  });
}
