#include "planner/ilp_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

// Some groups packed onto the cluster: the nodes of each class they take, and their price.
struct Packing {
  std::vector<int> counts;
  double price = 0;
};

// The packings no other is at most in every count and in price; false when there would be
// more than a limit (the pruning is then given up: it only ever narrows the program).
bool keep_least(std::vector<Packing>& packings) {
  constexpr std::size_t kMost = 20000;
  std::sort(packings.begin(), packings.end(), [](const Packing& a, const Packing& b) {
    return a.price != b.price ? a.price < b.price : a.counts < b.counts;
  });
  std::vector<Packing> kept;
  for (Packing& p : packings) {
    const bool beaten = std::any_of(kept.begin(), kept.end(), [&](const Packing& k) {
      for (std::size_t c = 0; c < p.counts.size(); ++c) {
        if (k.counts[c] > p.counts[c]) return false;
      }
      return true;
    });
    if (beaten) continue;
    if (kept.size() == kMost) return false;
    kept.push_back(std::move(p));
  }
  packings = std::move(kept);
  return true;
}

// Every sum of a packing of `a` and one of `b` that fits on the cluster (`sizes` nodes per
// class), the least of them kept; false past the limit.
bool combine(const std::vector<Packing>& a, const std::vector<Packing>& b, const std::vector<int>& sizes,
             std::vector<Packing>& out) {
  constexpr std::size_t kMostPairs = 4000000;
  if (a.size() * b.size() > kMostPairs) return false;
  out.clear();
  for (const Packing& p : a) {
    for (const Packing& q : b) {
      Packing sum{p.counts, p.price + q.price};
      bool fits = true;
      for (std::size_t c = 0; c < sizes.size() && fits; ++c) fits = (sum.counts[c] += q.counts[c]) <= sizes[c];
      if (fits) out.push_back(std::move(sum));
    }
  }
  return keep_least(out);
}

// Which allocations each group of each partition may take in a plan better than the incumbent
// and within the constraints. A group is busy for at least the sum of its tasks' least times
// (`floors`, each task's fastest strategy priced alone), so an allocation is usable only when
// that sum is within its busy cap, and when the partition's other groups can take usable
// allocations beside it: on the nodes left, within the budget, and under the cost objective at
// a price that, times the group's least busy time, is below the incumbent's price times its
// period. No plan the program could choose over the incumbent is lost. Empty when the packings
// grow past their limits (every allocation usable).
std::vector<std::vector<std::vector<char>>> usable_allocations(const Instance& x,
                                                               const std::vector<std::vector<double>>& floors,
                                                               const std::vector<double>& caps,
                                                               std::optional<double> price_period) {
  const Goal& goal = x.params.goal;
  const std::size_t classes = x.classes.size();
  std::vector<int> sizes(classes);
  for (std::size_t c = 0; c < classes; ++c) sizes[c] = static_cast<int>(x.classes[c].size());
  std::vector<std::vector<std::vector<char>>> out(x.partitions.size());
  std::vector<double> least(x.allocations.size());
  for (std::size_t p = 0; p < x.partitions.size(); ++p) {
    const auto& partition = x.partitions[p];
    const std::size_t k = partition.size();
    // Each group's candidates: the allocations its least busy time allows.
    std::vector<std::vector<Packing>> candidates(k);
    std::vector<std::vector<double>> busy(k, std::vector<double>(x.allocations.size(), 0.0));
    for (std::size_t g = 0; g < k; ++g) {
      for (std::size_t a = 0; a < x.allocations.size(); ++a) {
        for (int t : partition[g]) busy[g][a] += floors[t][a];
        if (busy[g][a] <= caps[a] && goal.within_budget(x.allocations[a].price)) {
          candidates[g].push_back({x.allocations[a].counts, x.allocations[a].price});
        }
      }
      if (!keep_least(candidates[g])) return {};
    }
    // The least packings of the groups before each group, and of those after it.
    std::vector<std::vector<Packing>> before(k + 1), after(k + 1);
    before[0] = after[k] = {Packing{std::vector<int>(classes, 0), 0.0}};
    for (std::size_t g = 0; g < k; ++g) {
      if (!combine(before[g], candidates[g], sizes, before[g + 1])) return {};
    }
    for (std::size_t g = k; g-- > 0;) {
      if (!combine(after[g + 1], candidates[g], sizes, after[g])) return {};
    }
    out[p].assign(k, std::vector<char>(x.allocations.size(), 0));
    std::vector<Packing> others;
    for (std::size_t g = 0; g < k; ++g) {
      if (!combine(before[g], after[g + 1], sizes, others)) return {};
      for (std::size_t a = 0; a < x.allocations.size(); ++a) {
        const Allocation& alloc = x.allocations[a];
        if (busy[g][a] > caps[a] || !goal.within_budget(alloc.price)) continue;
        out[p][g][a] = std::any_of(others.begin(), others.end(), [&](const Packing& rest) {
          for (std::size_t c = 0; c < classes; ++c) {
            if (rest.counts[c] + alloc.counts[c] > sizes[c]) return false;
          }
          const double price = rest.price + alloc.price;
          return goal.within_budget(price) && (!price_period || price * busy[g][a] <= *price_period * (1 + 1e-9));
        });
      }
    }
  }
  return out;
}

void describe(const IlpParams& params, const std::string& status, IlpOutcome& outcome) {
  plan::PlannerInfo& info = outcome.result.plan.planner;
  info.name = "ilp";
  info.params = {{"time_limit", fmt::format("{}", params.solve.time_limit)},
                 {"gap", fmt::format("{}", params.solve.relative_gap)},
                 {"status", status}};
  info.stats = {{"ilp_iteration_seconds", outcome.ilp_iteration_seconds},
                {"objective", outcome.solve.objective},
                {"bound", outcome.solve.bound},
                // Below 1e-9 the gap is rounding in the solver (1e-16 one run, 6e-16 the next).
                {"gap", std::abs(outcome.solve.gap) < 1e-9 ? 0.0 : outcome.solve.gap},
                {"configurations", static_cast<double>(outcome.configs)},
                {"configurations_kept", static_cast<double>(outcome.kept_configs)},
                {"columns", static_cast<double>(outcome.columns)},
                {"rows", static_cast<double>(outcome.rows)},
                {"warm_started", outcome.warm_started ? 1.0 : 0.0}};
  outcome.result.run_stats = {{"build_seconds", outcome.build_seconds},
                              {"solve_seconds", outcome.solve.seconds},
                              {"nodes", static_cast<double>(outcome.solve.nodes)}};
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

std::optional<std::string> ilp_refusal(const cost::CostModel& model, const IlpParams& params) {
  double allocations = 1;
  const std::vector<std::vector<int>> classes = model.cluster().node_classes().members;
  for (const std::vector<int>& members : classes) allocations *= static_cast<double>(members.size() + 1);
  if (allocations - 1 <= params.max_allocations) return std::nullopt;
  return fmt::format("the ILP would enumerate {:.3g} node allocations (every count of each of {} node classes), "
                     "past its limit of {:.3g}; use it on fewer node classes, or the hybrid planner",
                     allocations - 1, classes.size(), params.max_allocations);
}

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
  if (std::optional<std::string> why = ilp_refusal(model, params)) {
    return stopped(model, params, Stop::kRefused, std::move(*why), warm, IlpOutcome{});
  }
  const double start = clock.seconds();
  Instance x(model, models, params);
  plan::Evaluator evaluator(model);
  const std::optional<plan::Plan> incumbent = warm ? space_version(x, evaluator, *warm) : std::nullopt;
  Composer composer(model, models, params.space, x.allocations, clock, start + params.solve.time_limit,
                    params.max_configs);
  const std::vector<double> caps = busy_caps(x, evaluator, incumbent);
  composer.set_busy_caps(caps);
  std::optional<double> price_period;
  if (incumbent && params.goal.objective == Objective::kCostPerSample) {
    const plan::Prediction& p = evaluator.evaluate(*incumbent);
    if (params.goal.accepts(p) && p.price_per_hour) price_period = *p.price_per_hour * p.iteration_seconds;
  }
  const std::vector<std::vector<double>> floors = composer.floors(model.graph().gpu_tasks());
  if (!floors.empty()) x.usable = usable_allocations(x, floors, caps, price_period);
  if (!x.usable.empty()) {
    std::map<std::vector<int>, std::vector<char>> usable;
    for (std::size_t p = 0; p < x.partitions.size(); ++p) {
      for (std::size_t g = 0; g < x.partitions[p].size(); ++g) {
        std::vector<char>& any = usable[x.partitions[p][g]];
        any.resize(x.allocations.size(), 0);
        for (std::size_t a = 0; a < any.size(); ++a) any[a] = static_cast<char>(any[a] || x.usable[p][g][a]);
      }
    }
    composer.restrict_to(std::move(usable));
  }
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
  if (!params.export_lp.empty()) outcome.result.files.emplace_back(params.export_lp, ilp::lp_text(f.model));
  if (!params.export_mps.empty()) outcome.result.files.emplace_back(params.export_mps, ilp::mps_text(f.model));
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
