// hetrl-plan: choose a plan for an RL workload on a cluster, or predict a plan written by
// hand. With no arguments it plans the embedded default (a mixed cluster, a 7B PPO job).

#include <fmt/format.h>

#include <chrono>

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

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Planners:
  auto         the best plan of every planner below (the default)
  verl         every task colocated on all GPUs, one strategy, even batch split
  streamrl     generation and training on disjoint pools, batch split by speed
  homogeneous  the best plan on the nodes of a single GPU type
  exhaustive   every grouping, allocation and strategy: ground truth for small instances

Examples:
  hetrl-plan                                      plan the embedded default
  hetrl-plan --cluster c.json --workload w.json --planner streamrl -o plan.json
  hetrl-plan evaluate --cluster c.json --workload w.json --plan plan.json --explain)";

planner::PlannerResult run_planner(const std::string& name, const cost::CostModel& model,
                                   const workload::ModelCatalog& models) {
  const std::vector<int> nodes = planner::all_nodes(model.cluster());
  if (name == "verl") return planner::plan_verl(model, models, nodes);
  if (name == "streamrl") return planner::plan_streamrl(model, models, nodes);
  if (name == "homogeneous") return planner::plan_homogeneous(model, models);
  if (name == "exhaustive") return planner::plan_exhaustive(model, models);
  // auto: every planner, the best plan.
  planner::PlannerResult best;
  for (const char* each : {"verl", "streamrl", "homogeneous"}) {
    planner::PlannerResult result = run_planner(each, model, models);
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
  std::string cluster_path, workload_path, output, planner_name = "auto", plan_path;
  bool explain = false;
  app.add_option("--cluster", cluster_path, "Cluster file (hetrl.cluster/v1); default: the embedded one");
  app.add_option("--workload", workload_path, "Workload file (hetrl.workload/v1); default: the embedded one");
  CLI::Option* planner_option =
      app.add_option("--planner", planner_name, "Planner: auto, verl, streamrl, homogeneous, exhaustive")
          ->check(CLI::IsMember({"auto", "verl", "streamrl", "homogeneous", "exhaustive"}))
          ->capture_default_str();
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
      planner::PlannerResult result = run_planner(planner_name, model, catalogs.models);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!result.found) {
        throw core::JobError(fmt::format("no feasible plan ({} planner): {}", planner_name,
                                         result.why_not));
      }
      chosen = std::move(result.plan);
      if (planner_name == "auto") chosen.planner.params.insert(chosen.planner.params.begin(), {"chosen_by", "auto"});
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
