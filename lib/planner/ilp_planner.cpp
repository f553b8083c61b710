#include "planner/ilp_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "planner/ilp_configs.h"
#include "planner/ilp_formulation.h"
#include "planner/layout.h"

namespace hetrl::planner {
namespace {

using namespace ilp_detail;

// `warm` laid out as the space lays out its strategies (shares balanced once), or nullopt when
// it is not a plan of the space: whole nodes, the space's strategies, every GPU task placed once.
std::optional<plan::Plan> space_version(const Instance& x, plan::Evaluator& evaluator, const plan::Plan& warm) {
  const hw::Cluster& cluster = x.model.cluster();
  std::vector<int> class_of(cluster.nodes.size(), -1);
  for (std::size_t c = 0; c < x.classes.size(); ++c) {
    for (int node : x.classes[c]) class_of[node] = static_cast<int>(c);
  }
  std::vector<GroupChoice> groups;
  std::vector<int> placed;
  std::vector<int> gpus_used(cluster.nodes.size(), 0);
  for (const plan::Group& g : warm.groups) {
    GroupChoice& choice = groups.emplace_back();
    for (const plan::Gpu& gpu : g.gpus) {
      if (gpu.node < 0 || gpu.node >= static_cast<int>(gpus_used.size())) return std::nullopt;
      ++gpus_used[gpu.node];
      if (std::find(choice.nodes.begin(), choice.nodes.end(), gpu.node) == choice.nodes.end()) {
        choice.nodes.push_back(gpu.node);
      }
    }
    for (int node : choice.nodes) {
      if (gpus_used[node] != cluster.nodes[node].gpu_count) return std::nullopt;
    }
    std::stable_sort(choice.nodes.begin(), choice.nodes.end(), [&](int a, int b) { return class_of[a] < class_of[b]; });
    for (const plan::TaskPlacement& t : g.tasks) {
      if (t.replicas.empty()) return std::nullopt;
      const TaskChoice c{static_cast<int>(t.replicas.front().stages.front().devices.size()),
                         static_cast<int>(t.replicas.front().stages.size()), t.train};
      const std::vector<TaskChoice> space = task_choices(x.model, x.models, x.params.space, t.task, choice.nodes);
      const bool known = std::any_of(space.begin(), space.end(), [&](const TaskChoice& s) {
        return s.tp == c.tp && s.pp == c.pp && s.train == c.train;
      });
      if (!known) return std::nullopt;
      choice.tasks.push_back(t.task);
      choice.choices.push_back(c);
      placed.push_back(t.task);
    }
  }
  std::sort(placed.begin(), placed.end());
  plan::Plan out;
  if (placed != x.model.graph().gpu_tasks() || !realize(x.model, x.models, groups, out) ||
      !balance_shares(evaluator, out, 1).feasible) {
    return std::nullopt;
  }
  return out;
}

// The most a group on each allocation may be busy per iteration and still be part of a plan
// better than the incumbent (a group runs its tasks in turn, so the period is at least their
// sum) and fast enough for the minimum throughput; infinite without either. No configuration a
// better plan could use is lost.
std::vector<double> busy_caps(const Instance& x, plan::Evaluator& evaluator, const std::optional<plan::Plan>& incumbent) {
  const Goal& goal = x.params.goal;
  const double slack = 1 + 1e-9;
  std::vector<double> caps(x.allocations.size(), std::numeric_limits<double>::infinity());
  if (goal.min_throughput) {
    std::fill(caps.begin(), caps.end(), x.model.workload().samples_per_iteration() / *goal.min_throughput * slack);
  }
  if (!incumbent) return caps;
  const plan::Prediction& prediction = evaluator.evaluate(*incumbent);
  if (!goal.accepts(prediction)) return caps;
  const double period = prediction.iteration_seconds;
  const double price = prediction.price_per_hour.value_or(0.0);
  for (std::size_t a = 0; a < x.allocations.size(); ++a) {
    if (goal.objective == Objective::kThroughput) {
      caps[a] = std::min(caps[a], period * slack);
    } else if (x.allocations[a].price > 0) {
      // Dollars per sample grow with the price of every group and with the period.
      caps[a] = std::min(caps[a], price * period / x.allocations[a].price * slack);
    }
  }
  return caps;
}

void describe(const IlpParams& params, const std::string& status, IlpOutcome& outcome) {
  plan::PlannerInfo& info = outcome.result.plan.planner;
  info.name = "ilp";
  info.params = {{"time_limit", fmt::format("{}", params.solve.time_limit)},
                 {"gap", fmt::format("{}", params.solve.relative_gap)},
                 {"threads", fmt::format("{}", params.solve.threads)},
                 {"status", status}};
  info.stats = {{"ilp_iteration_seconds", outcome.ilp_iteration_seconds},
                {"objective", outcome.solve.objective},
                {"bound", outcome.solve.bound},
                {"gap", outcome.solve.gap},
                {"nodes", static_cast<double>(outcome.solve.nodes)},
                {"configurations", static_cast<double>(outcome.configs)},
                {"configurations_kept", static_cast<double>(outcome.kept_configs)},
                {"columns", static_cast<double>(outcome.columns)},
                {"rows", static_cast<double>(outcome.rows)},
                {"build_seconds", outcome.build_seconds},
                {"warm_started", outcome.warm_started ? 1.0 : 0.0},
                {"solve_seconds", outcome.solve.seconds}};
  outcome.result.evaluations = outcome.configs;
}

// The warm plan (the best known) as the result, when there is one and the goal accepts it.
void adopt_warm(const cost::CostModel& model, const IlpParams& params, const plan::Plan* warm,
                PlannerResult& result) {
  if (!warm) return;
  result.prediction = plan::Evaluator(model).evaluate(*warm);
  result.found = params.goal.accepts(result.prediction);
  if (result.found) result.plan.groups = warm->groups;
}

// The build stopped at a limit: refused, or at the time limit with the warm plan (the best so
// far) when there is one.
IlpOutcome stopped(const cost::CostModel& model, const IlpParams& params, Stop stop, std::string why,
                   const plan::Plan* warm, IlpOutcome outcome) {
  PlannerResult& result = outcome.result;
  result.stop = stop;
  result.why_not = std::move(why);
  if (stop == Stop::kTimeLimit) adopt_warm(model, params, warm, result);
  describe(params, stop == Stop::kRefused ? "refused" : "build time limit", outcome);
  return outcome;
}

}  // namespace

long long ilp_configuration_count(const cost::CostModel& model, const workload::ModelCatalog& models,
                                  const IlpParams& params) {
  const Instance x(model, models, params);
  const core::FakeClock clock;
  Composer composer(model, models, params.space, x.allocations, clock, 0, 0);
  return composer.space_size(x.groups());
}

IlpOutcome plan_ilp(const cost::CostModel& model, const workload::ModelCatalog& models,
                    const IlpParams& params, const core::Clock& clock, const plan::Plan* warm) {
  require_prices(model.cluster(), params.goal);
  if (const std::optional<std::string> why = params.goal.unreachable(model.cluster())) {
    IlpOutcome outcome;
    outcome.result.why_not = *why;
    describe(params, "infeasible", outcome);
    return outcome;
  }
  const double start = clock.seconds();
  const Instance x(model, models, params);
  plan::Evaluator evaluator(model);
  const std::optional<plan::Plan> incumbent = warm ? space_version(x, evaluator, *warm) : std::nullopt;
  Composer composer(model, models, params.space, x.allocations, clock, start + params.solve.time_limit,
                    params.max_configs);
  composer.set_busy_caps(busy_caps(x, evaluator, incumbent));
  const ComposeEnd end = composer.compose(x.groups());
  IlpOutcome outcome;
  outcome.configs = composer.composed();
  outcome.kept_configs = composer.kept();
  if (end == ComposeEnd::kTimeLimit) {
    return stopped(model, params, Stop::kTimeLimit,
                   fmt::format("the ILP's build passed the time limit of {:.4g} s after composing {} group "
                               "configurations; give it more time, or use the hybrid planner",
                               params.solve.time_limit, outcome.configs),
                   warm, std::move(outcome));
  }
  if (end == ComposeEnd::kTooMany) {
    return stopped(model, params, Stop::kRefused,
                   fmt::format("the ILP would compose more than {} group configurations; use it on fewer "
                               "node types or tasks, or the hybrid planner", params.max_configs),
                   warm, std::move(outcome));
  }
  Formulation f;
  if (!formulate(x, composer, f)) {
    return stopped(model, params, Stop::kRefused,
                   fmt::format("the ILP model would have more than {} columns (node allocations of every "
                               "group, and their pairs); use it on fewer nodes, or the hybrid planner",
                               params.max_columns),
                   warm, std::move(outcome));
  }
  outcome.columns = static_cast<int>(f.model.columns().size());
  outcome.rows = static_cast<int>(f.model.rows().size());
  outcome.build_seconds = clock.seconds() - start;
  if (!params.export_lp.empty()) ilp::write_lp(f.model, params.export_lp);
  if (!params.export_mps.empty()) ilp::write_mps(f.model, params.export_mps);
  ilp::SolveParams solve = params.solve;
  solve.time_limit = std::max(0.1, params.solve.time_limit - outcome.build_seconds);
  if (incumbent) {
    std::vector<double> values = warm_start(x, f, evaluator, *incumbent);
    if (!values.empty() && f.model.satisfied_by(values, 1e-6)) {
      solve.warm_start = std::move(values);
      outcome.warm_started = true;
    }
  }
  outcome.solve = ilp::solve(f.model, solve);
  outcome.solved = true;
  PlannerResult& result = outcome.result;
  const ilp::Status status = outcome.solve.status;
  if (status == ilp::Status::kFeasible || status == ilp::Status::kNoSolution) result.stop = Stop::kTimeLimit;
  if (status == ilp::Status::kOptimal || status == ilp::Status::kFeasible) {
    outcome.ilp_iteration_seconds = outcome.solve.values[f.t];
    plan::Plan p;
    if (decode(x, f, evaluator, outcome.solve.values, p)) {
      result.prediction = plan::Evaluator(model).evaluate(p);
      result.found = result.prediction.feasible;
      result.plan.groups = std::move(p.groups);
    }
  }
  if (!result.found) {
    result.why_not = status == ilp::Status::kInfeasible
                         ? std::string("the ILP is infeasible: nothing fits in memory, or no plan meets the constraints")
                         : fmt::format("the ILP solver found no plan ({}{})", ilp::status_name(status),
                                       outcome.solve.message.empty() ? "" : ": " + outcome.solve.message);
    // Stopped or failed without a plan of its own: the warm start is the best one known.
    if (status == ilp::Status::kNoSolution || status == ilp::Status::kError) adopt_warm(model, params, warm, result);
  }
  describe(params, ilp::status_name(status), outcome);
  return outcome;
}

std::string ilp_summary(const IlpOutcome& o, const Goal& goal, const std::string& warm_from) {
  if (!o.solved) {
    const bool kept = o.result.found;
    return fmt::format("ilp: stopped: {}{}", o.result.why_not,
                       kept ? fmt::format("; the plan is the warm start's ({})", warm_from) : "");
  }
  const ilp::SolveResult& s = o.solve;
  const plan::Prediction& p = o.result.prediction;
  const bool own = s.status == ilp::Status::kOptimal || s.status == ilp::Status::kFeasible;
  std::string objective;
  if (o.result.found && !own) {
    objective = fmt::format("{}; the plan is the warm start's ({})",
                            s.message.empty() ? "no plan of its own" : s.message, warm_from);
  } else if (!o.result.found) {
    objective = "no plan";
  } else if (goal.objective == Objective::kCostPerSample) {
    objective = fmt::format("objective {:.6f} $ per 1k samples (the plan evaluates to {:.6f})", s.objective,
                            p.dollars_per_sample().value_or(0) * 1000.0);
  } else {
    objective = fmt::format("objective {:.6f} s per iteration (the plan evaluates to {:.6f} s)",
                            o.ilp_iteration_seconds, p.iteration_seconds);
  }
  return fmt::format(
      "ilp: {}; {}; bound {:.6f}; gap {:.2g}; {} nodes; {} configurations composed, {} kept; {} columns, "
      "{} rows; build {:.2f} s, solve {:.2f} s{}",
      ilp::status_name(s.status), objective, s.bound, s.gap, s.nodes, o.configs, o.kept_configs, o.columns,
      o.rows, o.build_seconds, s.seconds, o.warm_started ? fmt::format("; warm-started from {}", warm_from) : "");
}

}  // namespace hetrl::planner
