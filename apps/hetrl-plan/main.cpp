// hetrl-plan: choose a plan for an RL workload on a cluster, or predict a plan written by
// hand. With no arguments it plans the embedded default (a mixed cluster, a 7B PPO job).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <unistd.h>

#include "common/tool.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/version.h"
#include "io/catalog_io.h"
#include "io/cluster_io.h"
#include "hw/cluster_builder.h"
#include "io/compare_io.h"
#include "io/files.h"
#include "io/inputs.h"
#include "io/market_io.h"
#include "io/plan_io.h"
#include "plan/compare.h"
#include "plan/export.h"
#include "plan/replan.h"
#include "plan/report.h"
#include "planner/capacity.h"
#include "planner/registry.h"

namespace {

using namespace hetrl;

std::string footer() {
  std::string out = "Planners:\n";
  for (const planner::PlannerEntry& p : planner::planner_table()) {
    out += fmt::format("  {:<12} {}\n", p.name, p.description);
  }
  return out + R"(
Examples:
  hetrl-plan                                      plan the embedded default
  hetrl-plan --cluster c.json --workload w.json --planner streamrl -o plan.json
  hetrl-plan evaluate --cluster c.json --workload w.json --plan plan.json --explain
  hetrl-plan compare --workload w.json a.json b.json --csv compare.csv
  hetrl-plan replan --cluster c.json --workload w.json --plan plan.json --without a100-1 -o new.json
  hetrl-plan capacity --workload w.json --market market.json --target-samples-per-s 4 --pareto
  hetrl-plan export --cluster c.json --workload w.json --plan plan.json --to verl -o run-verl.sh)";
}

// hybrid's progress on a terminal, once a search takes more than a second.
std::function<void(const planner::SearchProgress&)> progress_line(bool& shown) {
  if (::isatty(STDERR_FILENO) == 0) return {};
  return [&shown](const planner::SearchProgress& p) {
    if (p.seconds < 1.0) return;
    shown = true;
    std::fprintf(stderr, "\rhybrid: round %d, %d candidates left, %lld evaluations, %.1f s   ", p.round,
                 p.candidates_left, p.evaluations, p.seconds);
  };
}

// Runs the planner, with hybrid's progress line on a terminal: its result and the seconds it took.
std::pair<planner::PlannerResult, double> timed_plan(const planner::PlannerEntry& entry, const cost::CostModel& model,
                                                     const workload::ModelCatalog& models,
                                                     planner::PlanRequest& request) {
  const core::SteadyClock clock;
  bool shown = false;
  request.progress = progress_line(shown);
  const double start = clock.seconds();
  planner::PlannerResult result = entry.run(model, models, request, clock);
  const double seconds = clock.seconds() - start;
  request.progress = {};  // it refers to `shown`
  if (shown) std::fprintf(stderr, "\n");
  return {std::move(result), seconds};
}

// replan: the cluster without the nodes lost and with those gained (node specs and preset node
// specs); returns what changed in words ("without a100-1 and with us-east-1b-l40s-0").
std::string change_cluster(hw::Cluster& cluster, const std::vector<std::string>& without,
                           const std::vector<std::string>& with_nodes, const std::vector<std::string>& with_presets,
                           const hw::Catalog& catalog) {
  std::vector<hw::NodeGroup> added;
  for (const std::string& spec : with_nodes) added.push_back(hw::parse_node_spec(spec, catalog));
  for (const std::string& spec : with_presets) added.push_back(hw::parse_preset_node_spec(spec, catalog));
  std::string change;
  if (!without.empty()) {
    cluster = cluster.without_nodes(without);
    change = fmt::format("without {}", fmt::join(without, ", "));
  }
  if (!added.empty()) {
    const std::size_t kept = cluster.nodes.size();
    cluster = hw::with_nodes(cluster, added, catalog);
    std::vector<std::string> names;
    for (std::size_t n = kept; n < cluster.nodes.size(); ++n) names.push_back(cluster.nodes[n].name);
    change += fmt::format("{}with {}", change.empty() ? "" : " and ", fmt::join(names, ", "));
  }
  return change;
}

// hetrl-plan compare: every cluster loaded (a bad one stops the run before any planning), then
// each planned in turn; a cluster with no feasible plan is a row saying why, and the run fails
// only when none has one.
int compare_clusters(const std::vector<std::string>& paths, const std::string& workload_path,
                     const planner::PlannerEntry& entry, planner::PlanRequest request, const std::string& objective,
                     const std::string& csv_path, const std::string& json_path) {
  std::vector<std::string> inputs = paths;
  inputs.push_back(workload_path);
  io::check_outputs(std::vector<std::string>{csv_path, json_path}, inputs);
  const io::Catalogs& catalogs = io::builtin_catalogs();
  std::vector<io::Inputs> loaded;
  for (const std::string& path : paths) loaded.push_back(io::load_inputs(path, workload_path, catalogs));
  std::vector<plan::ClusterSummary> rows;
  io::ComparisonInputs about{loaded.front().workload.name, loaded.front().workload_hash, std::string(entry.name), objective,
                             request.goal.budget_per_hour, request.goal.min_throughput, {}};
  bool any = false;
  std::string why_none;
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const io::Inputs& in = loaded[i];
    const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
    auto [result, seconds] = timed_plan(entry, model, in.workload.models, request);
    plan::ClusterSummary row;
    if (result.found) {
      plan::Evaluator evaluator(model);
      const plan::Prediction& prediction = evaluator.evaluate(result.plan);
      row = plan::summarise(result.plan, prediction, evaluator.edge_transfers(), in.cluster, in.graph);
    } else {
      row = plan::no_plan(in.cluster, result.why_not);
    }
    row.file = paths[i];
    row.planning_seconds = seconds;
    any = any || row.found;
    if (!row.found) why_none += fmt::format("{}{}: {}", why_none.empty() ? "" : "; ", in.cluster.name, row.why_not);
    rows.push_back(std::move(row));
    about.cluster_hashes.push_back(in.cluster_hash);
  }
  if (!any) throw core::JobError(fmt::format("no feasible plan on any cluster ({} planner): {}", entry.name, why_none));
  io::OutputFiles files;
  if (!csv_path.empty()) files.add(csv_path, plan::comparison_csv(rows));
  if (!json_path.empty()) files.add(json_path, io::comparison_json(about, rows));
  files.commit();
  std::FILE* table = csv_path == io::kStdout || json_path == io::kStdout ? stderr : stdout;
  fmt::print(table, "{}", plan::format_comparison(rows, about.workload_name));
  for (const std::string& path : {csv_path, json_path}) {
    if (!path.empty() && path != io::kStdout) fmt::print(table, "wrote {}\n", path);
  }
  return apps::kExitOk;
}

struct CapacityArgs {
  std::string market_path, workload_path;
  double target = 0;
  bool pareto = false;
  std::string output, cluster_output, csv_path, json_path;
};

// hetrl-plan capacity: the cheapest cluster of a market whose best plan reaches the target, each
// cluster the search looks at planned with the planner and settings given, within --time-limit
// for the whole search; then that cluster planned again, its plan printed and written.
int plan_capacity(const CapacityArgs& args, const planner::PlannerEntry& entry, const planner::PlanRequest& request) {
  io::check_outputs(std::vector<std::string>{args.output, args.cluster_output, args.csv_path, args.json_path},
                    std::vector<std::string>{args.market_path, args.workload_path});
  const io::Catalogs& catalogs = io::builtin_catalogs();
  const std::string market_text = io::read_text_file(args.market_path);
  const planner::Market market = io::parse_market(market_text, args.market_path, catalogs.hardware);
  const std::string market_hash = core::content_hash(market_text);
  const io::WorkloadInputs in = io::load_workload(args.workload_path, catalogs);
  const workload::ModelCatalog& models = in.workload.models;
  const core::SteadyClock clock;
  const double start = clock.seconds();
  const core::Deadline deadline{&clock, start + request.time_limit};
  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  long long planned = 0;
  std::string why_none;  // the largest cluster's reason, when none has a plan
  int why_none_gpus = -1;
  const auto plan_on = [&](const hw::Cluster& cluster, double time_limit) {
    const cost::CostModel model(cluster, in.workload.workload, in.graph, models);
    planner::PlanRequest r = request;
    r.time_limit = time_limit;
    return entry.run(model, models, r, clock);
  };
  planner::CapacitySearch search(
      market,
      planner::planning_oracle(market, catalogs.hardware,
                               [&](const hw::Cluster& cluster) {
                                 const double left = deadline.at - clock.seconds();
                                 const planner::PlannerResult result =
                                     plan_on(cluster, std::max(1.0, std::min(request.time_limit, left)));
                                 if (terminal) {
                                   std::fprintf(stderr, "\rcapacity: %lld clusters planned, %.1f s   ", ++planned,
                                                clock.seconds() - start);
                                 }
                                 if (!result.found && cluster.total_gpus() > why_none_gpus) {
                                   why_none_gpus = cluster.total_gpus();
                                   why_none = result.why_not;
                                 }
                                 return result.found ? result.prediction.samples_per_second : 0.0;
                               }),
      deadline);
  planner::CapacityReport report{in.workload.name, std::string(entry.name), args.target, {}, args.pareto, {}, 0};
  report.result = search.cheapest(args.target);
  if (args.pareto) {
    bool proven = true;
    report.front = search.front(args.target, &proven);
    report.result.proven = report.result.proven && proven;
    report.result.planned = search.planned();
  }
  report.seconds = clock.seconds() - start;
  if (terminal && planned > 0) std::fprintf(stderr, "\n");
  const planner::CapacityResult& r = report.result;
  const std::string within = r.proven ? "" : fmt::format(" within the time limit of {:g} s", request.time_limit);
  if (!r.fastest) {
    throw core::JobError(fmt::format("no cluster of market {} has a plan for the workload{}: {}", core::quoted(market.name),
                                     within, why_none.empty() ? "none was planned" : why_none));
  }
  if (!r.cheapest) {
    const planner::CapacityPoint& f = *r.fastest;
    throw core::JobError(fmt::format(
        "no cluster of market {} reaches {:g} samples/s{}: the fastest found reaches {:.4g} samples/s ({} GPUs: {}; ${:.2f}/h)",
        core::quoted(market.name), args.target, within, f.samples_per_second, planner::market_gpus(market, f.counts),
        planner::gpus_text(market, f.counts), f.usd_per_hour));
  }
  // The cheapest cluster, named as the market, planned again for its plan.
  hw::Cluster cluster = planner::market_cluster(market, r.cheapest->counts, catalogs.hardware, market.name);
  planner::PlannerResult result = plan_on(cluster, request.time_limit);
  if (!result.found) throw core::JobError("the cheapest cluster planned again has no plan: " + result.why_not);
  plan::Plan chosen = std::move(result.plan);
  chosen.cluster_hash = core::content_hash(io::cluster_to_json(cluster));
  chosen.workload_hash = in.hash;
  const cost::CostModel model(cluster, in.workload.workload, in.graph, models);
  plan::Evaluator evaluator(model);
  const plan::Prediction& prediction = evaluator.evaluate(chosen);
  io::OutputFiles files;
  if (!args.output.empty()) files.add(args.output, io::plan_to_json(chosen, prediction, cluster, in.graph));
  if (!args.cluster_output.empty()) files.add(args.cluster_output, io::cluster_to_json(cluster));
  const std::vector<planner::CapacityPoint> rows = args.pareto ? report.front : std::vector{*r.cheapest};
  if (!args.csv_path.empty()) files.add(args.csv_path, planner::capacity_csv(market, rows, args.target));
  if (!args.json_path.empty()) files.add(args.json_path, io::capacity_json(market, report, market_hash, in.hash));
  files.commit();
  const bool to_stdout = args.output == io::kStdout || args.cluster_output == io::kStdout ||
                         args.csv_path == io::kStdout || args.json_path == io::kStdout;
  std::FILE* table = to_stdout ? stderr : stdout;
  fmt::print(table, "{}\n", planner::format_capacity(market, report));
  const plan::ReportContext context{in.workload.name, cluster, in.graph, in.workload.workload};
  fmt::print(table, "{}", plan::format_plan(chosen, prediction, context, false));
  for (const std::string& path : {args.output, args.cluster_output, args.csv_path, args.json_path}) {
    if (!path.empty() && path != io::kStdout) fmt::print(table, "wrote {}\n", path);
  }
  return apps::kExitOk;
}

// hetrl-plan export: the plan read against its cluster and workload, predicted (the rollout's
// memory share comes from it), and written as the runtime's configuration, or refused with
// every reason the runtime cannot run it.
int export_plan(const std::string& cluster_path, const std::string& workload_path, const std::string& plan_path,
                plan::Runtime runtime, const std::string& output) {
  io::check_outputs(std::vector<std::string>{output}, std::vector<std::string>{cluster_path, workload_path, plan_path});
  const io::Catalogs& catalogs = io::builtin_catalogs();
  const io::Inputs in = io::load_inputs(cluster_path, workload_path, catalogs);
  const plan::Plan chosen = io::read_plan(plan_path, in.cluster, in.graph, in.workload.models);
  const cost::CostModel model(in.cluster, in.workload.workload, in.graph, in.workload.models);
  plan::Evaluator evaluator(model);
  const plan::Prediction& prediction = evaluator.evaluate(chosen, true);
  if (!prediction.feasible) throw core::JobError("the plan does not fit: " + prediction.infeasible);
  const plan::ExportInputs inputs{chosen, in.cluster, in.workload.workload, in.graph, in.workload.models, model, prediction};
  const std::string text = plan::format_export(plan::export_plan(runtime, inputs), inputs, in.workload.name);
  if (output.empty() || output == io::kStdout) {
    fmt::print("{}", text);
    return apps::kExitOk;
  }
  io::OutputFiles files;
  files.add(output, text);
  files.commit();
  fmt::print("wrote {}\n", output);
  return apps::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plan RL post-training on a heterogeneous cluster, or predict a plan.", "hetrl-plan"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(footer());
  std::string cluster_path, workload_path, output, plan_path, objective = "throughput", name = "hybrid";
  bool explain = false;
  double budget = 0, min_throughput = 0;
  planner::PlanRequest request;
  app.add_option("--cluster", cluster_path, "Cluster file (hetrl.cluster/v1); default: the embedded one");
  app.add_option("--workload", workload_path, "Workload file (hetrl.workload/v1); default: the embedded one");
  CLI::Option* planner_option =
      app.add_option("--planner", name, fmt::format("Planner: {}", fmt::join(planner::planner_names(), ", ")))
          ->check(CLI::IsMember(planner::planner_names()))->capture_default_str();
  using planner::Setting;
  const std::vector<std::pair<CLI::Option*, Setting>> settings = {
      {app.add_option("--time-limit", request.time_limit, "Seconds the whole search may take")
           ->check(apps::finite_positive())->capture_default_str(), Setting::kTimeLimit},
      {app.add_option("--seed", request.seed, "The search's seed")->check(apps::unsigned_integer())->capture_default_str(),
       Setting::kSeed},
      {app.add_option("--objective", objective, "throughput, or cost (per sample)")
           ->check(CLI::IsMember({"throughput", "cost"}))->capture_default_str(), Setting::kGoal},
      {app.add_option("--budget-per-hour", budget, "The most the plan's GPUs may cost, USD per hour")
           ->check(apps::finite_positive()), Setting::kGoal},
      {app.add_option("--min-throughput", min_throughput, "The least samples/s a plan must reach")
           ->check(apps::finite_positive()), Setting::kGoal},
      {app.add_option("--max-groups", request.max_groups, "The most groups a plan may have")
           ->check(apps::whole_number(1, 8))->capture_default_str(), Setting::kMaxGroups},
      {app.add_option("--gap", request.solver.relative_gap, "The solver's relative optimality gap to stop at")
           ->check(apps::finite_range(0.0, 1.0))->capture_default_str(), Setting::kSolver},
      {app.add_option("--threads", request.solver.threads, "Solver threads")
           ->check(apps::whole_number(1, 256))->capture_default_str(), Setting::kSolver},
      {app.add_option("--export-lp", request.export_lp, "Write the model as an LP file"), Setting::kSolver},
      {app.add_option("--export-mps", request.export_mps, "Write the model as an MPS file"), Setting::kSolver},
      {app.add_flag("--solver-log", request.solver.log, "Show CBC's own output"), Setting::kSolver},
  };
  for (const auto& [option, setting] : settings) {
    option->description(fmt::format("{} ({})", option->get_description(), planner::planners_taking(setting)));
  }
  app.add_option("-o,--output", output, "Write the plan (hetrl.plan/v1) here ('-': standard output, the table then on standard error)");
  app.add_flag("--explain", explain, "Show every term of every task's estimate");
  CLI::App* evaluate = app.add_subcommand("evaluate", "Predict a plan written by hand or by a planner");
  evaluate->add_option("--plan", plan_path, "The plan file (hetrl.plan/v1)")->required();
  evaluate->fallthrough();
  std::vector<std::string> compared;
  std::string csv_path, json_path;
  CLI::App* compare =
      app.add_subcommand("compare", "The best plan for the workload on each of several clusters, side by side");
  compare->add_option("clusters", compared, "Cluster files (hetrl.cluster/v1), the first the one compared against")
      ->required();
  compare->add_option("--csv", csv_path, "Write the comparison as CSV here ('-': standard output, the table then on "
                                         "standard error)");
  compare->add_option("--json", json_path, "Write the comparison (hetrl.compare/v1) here ('-': standard output, the "
                                           "table then on standard error)");
  compare->fallthrough();
  std::vector<std::string> without, with_nodes, with_presets;
  CLI::App* replan = app.add_subcommand("replan", "The plan again after the cluster loses or gains nodes, with what moved");
  replan->add_option("--plan", plan_path, "The plan before (hetrl.plan/v1)")->required();
  replan->add_option("--without", without, "Nodes lost, by name (NODE[,NODE...]; again for more)")->delimiter(',');
  replan->add_option("--with", with_nodes, "Nodes gained, as hetrl-cluster --node gives them: ZONE:[N x]M x GPU[:key=value,...]");
  replan->add_option("--with-preset", with_presets, "Nodes gained, as hetrl-cluster --preset-node gives them: ZONE:[N x]INSTANCE");
  std::string cluster_output;
  replan->add_option("--write-cluster", cluster_output, "Write the cluster as it is now (hetrl.cluster/v1) here, for the "
                                                        "new plan to be read against");
  replan->fallthrough();
  CapacityArgs capacity_args;
  CLI::App* capacity = app.add_subcommand(
      "capacity", "The cheapest cluster of a market whose best plan reaches a target throughput (--time-limit: the whole search's)");
  capacity->add_option("--market", capacity_args.market_path, "The market (hetrl.market/v1): what can be rented, where, at what price")
      ->required();
  capacity->add_option("--target-samples-per-s", capacity_args.target, "The samples/s the cluster's best plan must reach")
      ->required()->check(apps::finite_positive());
  capacity->add_flag("--pareto", capacity_args.pareto,
                     "Also the front of throughput against price, from the cheapest cluster with a plan up to the target");
  capacity->add_option("--csv", capacity_args.csv_path, "Write the cluster found (with --pareto, the front) as CSV here");
  capacity->add_option("--json", capacity_args.json_path, "Write the search's answer (hetrl.capacity/v1) here");
  capacity->add_option("--write-cluster", capacity_args.cluster_output, "Write the cheapest cluster (hetrl.cluster/v1) here");
  capacity->fallthrough();
  std::string runtime;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "The configuration of the runtime that deploys a plan: verl's overrides or OpenRLHF's flags");
  export_cmd->add_option("--plan", plan_path, "The plan (hetrl.plan/v1)")->required();
  export_cmd->add_option("--to", runtime, "The runtime: verl (0.8), openrlhf (0.11)")
      ->required()->check(CLI::IsMember({"verl", "openrlhf"}));
  export_cmd->fallthrough();
  app.require_subcommand(0, 1);

  return apps::run_tool(app, argc, argv, [&] {
    const planner::PlannerEntry& entry = *planner::find_planner(name);
    const bool reads_plan = evaluate->parsed() || export_cmd->parsed();
    const std::string plan_command = evaluate->parsed() ? "evaluate" : "export";
    if (reads_plan && planner_option->count() > 0) {
      apps::usage_error(fmt::format("--planner does not apply to '{}'", plan_command));
    }
    if (replan->parsed() && without.empty() && with_nodes.empty() && with_presets.empty()) {
      apps::usage_error("'replan' needs --without, --with or --with-preset");
    }
    for (const auto& [option, setting] : settings) {
      if (option->count() == 0) continue;
      if (reads_plan) apps::usage_error(fmt::format("{} does not apply to '{}'", option->get_name(), plan_command));
      if (!entry.takes(setting)) {
        apps::usage_error(fmt::format("{} applies to {} only", option->get_name(),
                                      planner::planners_taking(setting)));
      }
    }
    request.goal.objective = objective == "cost" ? planner::Objective::kCostPerSample : planner::Objective::kThroughput;
    if (budget > 0) request.goal.budget_per_hour = budget;
    if (min_throughput > 0) request.goal.min_throughput = min_throughput;
    if (capacity->parsed()) {
      if (!cluster_path.empty()) apps::usage_error("'capacity' takes a --market, not --cluster");
      if (explain) apps::usage_error("--explain does not apply to 'capacity'");
      if (request.goal.objective != planner::Objective::kThroughput || request.goal.constrained()) {
        apps::usage_error("'capacity' plans each cluster for throughput: --objective, --budget-per-hour and "
                          "--min-throughput do not apply");
      }
      int to_stdout = 0;
      for (const std::string* path : {&output, &capacity_args.cluster_output, &capacity_args.csv_path, &capacity_args.json_path}) {
        to_stdout += *path == io::kStdout ? 1 : 0;
      }
      if (to_stdout > 1) apps::usage_error("only one of -o, --write-cluster, --csv and --json can go to standard output");
      capacity_args.workload_path = workload_path;
      capacity_args.output = output;
      return plan_capacity(capacity_args, entry, request);
    }
    if (compare->parsed()) {
      if (!cluster_path.empty()) apps::usage_error("'compare' takes its cluster files after it, not --cluster");
      if (!output.empty()) apps::usage_error("-o does not apply to 'compare' (--csv, --json)");
      if (explain) apps::usage_error("--explain does not apply to 'compare'");
      if (csv_path == io::kStdout && json_path == io::kStdout) {
        apps::usage_error("--csv and --json cannot both go to standard output");
      }
      return compare_clusters(compared, workload_path, entry, request, objective, csv_path, json_path);
    }
    if (export_cmd->parsed()) {
      if (explain) apps::usage_error("--explain does not apply to 'export'");
      return export_plan(cluster_path, workload_path, plan_path, *plan::runtime_from_name(runtime), output);
    }
    // Outputs that cannot be written, or would replace an input, fail now, not after minutes
    // of planning.
    if (cluster_output == io::kStdout && output == io::kStdout) {
      apps::usage_error("-o and --write-cluster cannot both go to standard output");
    }
    io::check_outputs(std::vector<std::string>{output, request.export_lp, request.export_mps, cluster_output},
                      std::vector<std::string>{cluster_path, workload_path,
                                               evaluate->parsed() || replan->parsed() ? plan_path : ""});
    const io::Catalogs& catalogs = io::builtin_catalogs();
    io::Inputs inputs = io::load_inputs(cluster_path, workload_path, catalogs);
    // replan: the plan before on the cluster as given, then the cluster as it is now.
    std::optional<plan::Plan> before_plan;
    std::optional<hw::Cluster> before_cluster;
    std::string change;
    if (replan->parsed()) {
      before_plan = io::read_plan(plan_path, inputs.cluster, inputs.graph, inputs.workload.models);
      before_cluster = inputs.cluster;
      change = change_cluster(inputs.cluster, without, with_nodes, with_presets, catalogs.hardware);
      // The new plan is made for the cluster as it is now (what --write-cluster writes).
      inputs.cluster_hash = core::content_hash(io::cluster_to_json(inputs.cluster));
    }
    const cost::CostModel model(inputs.cluster, inputs.workload.workload, inputs.graph, inputs.workload.models);
    plan::Plan chosen;
    std::vector<std::pair<std::string, std::string>> planner_files;  // the ILP's model, if asked
    if (evaluate->parsed()) {
      chosen = io::read_plan(plan_path, inputs.cluster, inputs.graph, inputs.workload.models);
    } else {
      auto [result, seconds] = timed_plan(entry, model, inputs.workload.models, request);
      if (!result.found) throw core::JobError(fmt::format("no feasible plan ({} planner): {}", name, result.why_not));
      if (!result.summary.empty()) fmt::print(stderr, "{}\n", result.summary);
      chosen = std::move(result.plan);
      planner_files = std::move(result.files);
      chosen.planner.stats.emplace_back("planning_seconds", seconds);
      fmt::print(stderr, "planned in {:.2f} s ({} evaluations)\n", seconds, result.evaluations);
    }
    chosen.cluster_hash = inputs.cluster_hash;
    chosen.workload_hash = inputs.workload_hash;
    plan::Evaluator evaluator(model);
    const plan::Prediction& prediction = evaluator.evaluate(chosen, explain);
    if (!prediction.feasible) throw core::JobError("the plan does not fit: " + prediction.infeasible);
    // The plan and the ILP's model files are written together, or none of them.
    io::OutputFiles files;
    for (const auto& [path, content] : planner_files) files.add(path, content);
    if (!output.empty()) files.add(output, io::plan_to_json(chosen, prediction, inputs.cluster, inputs.graph));
    if (!cluster_output.empty()) files.add(cluster_output, io::cluster_to_json(inputs.cluster));
    files.commit();
    // With the plan on standard output the table goes to standard error.
    std::FILE* table = output == io::kStdout || cluster_output == io::kStdout ? stderr : stdout;
    if (before_plan) {
      const cost::CostModel before_model(*before_cluster, inputs.workload.workload, inputs.graph,
                                         inputs.workload.models);
      plan::Evaluator before_evaluator(before_model);
      const plan::Prediction& before = before_evaluator.evaluate(*before_plan);
      fmt::print(table, "{}\n", plan::format_replan({*before_plan, before, *before_cluster},
                                                    {chosen, prediction, inputs.cluster}, inputs.graph, change));
    }
    const plan::ReportContext context{inputs.workload.name, inputs.cluster, inputs.graph, inputs.workload.workload};
    fmt::print(table, "{}", plan::format_plan(chosen, prediction, context, explain));
    for (const auto& [path, content] : planner_files) fmt::print(table, "\nwrote {}", path);
    for (const std::string& path : {output, cluster_output}) {
      if (!path.empty() && path != io::kStdout) fmt::print(table, "\nwrote {}", path);
    }
    if (!output.empty() || !cluster_output.empty() || !planner_files.empty()) fmt::print(table, "\n");
    return apps::kExitOk;
  });
}
