#include "planner/exhaustive.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/error.h"
#include "planner/layout.h"
#include "planner/pricer.h"

namespace hetrl::planner {
namespace {

// Calls visit(groups) for every allocation of the nodes to `k` groups (or to none) in which
// every group gets a node, with each group's strategy choices filled in.
void for_each_allocation(const cost::CostModel& model, const workload::ModelCatalog& models,
                         const SearchSpace& space, const std::vector<std::vector<int>>& partition,
                         const std::function<void(std::vector<GroupChoice>&,
                                                  const std::vector<std::vector<TaskChoice>>&)>& visit) {
  const int nodes = static_cast<int>(model.cluster().nodes.size());
  const int k = static_cast<int>(partition.size());
  std::vector<int> owner(nodes, 0);  // 0..k-1 a group, k unused
  while (true) {
    std::vector<GroupChoice> groups(k);
    for (int g = 0; g < k; ++g) groups[g].tasks = partition[g];
    for (int n = 0; n < nodes; ++n) {
      if (owner[n] < k) groups[owner[n]].nodes.push_back(n);
    }
    const bool all_used = std::all_of(groups.begin(), groups.end(),
                                      [](const GroupChoice& g) { return !g.nodes.empty(); });
    if (all_used) {
      std::vector<std::vector<TaskChoice>> choices;  // per task, flattened over the groups
      for (const GroupChoice& g : groups) {
        for (int t : g.tasks) choices.push_back(task_choices(model, models, space, t, g.nodes));
      }
      visit(groups, choices);
    }
    int n = 0;
    for (; n < nodes; ++n) {
      if (++owner[n] <= k) break;
      owner[n] = 0;
    }
    if (n == nodes) break;
  }
}

// Maps of `nodes` nodes to k groups or to none in which no group is empty: by inclusion and
// exclusion over the groups left empty, sum_j (-1)^j C(k, j) (k + 1 - j)^nodes. Infinity past 1e30.
double allocations(int nodes, int k) {
  if (nodes * std::log10(k + 1.0) > 30) return std::numeric_limits<double>::infinity();
  long double sum = 0, choose = 1;
  for (int j = 0; j <= k; ++j) {
    sum += (j % 2 == 0 ? 1 : -1) * choose * std::pow(static_cast<long double>(k + 1 - j), nodes);
    choose = choose * (k - j) / (j + 1);
  }
  return static_cast<double>(sum);
}

}  // namespace

double exhaustive_allocation_count(const cost::CostModel& model, const ExhaustiveParams& params) {
  const int nodes = static_cast<int>(model.cluster().nodes.size());
  double count = 0;
  for (const auto& partition : partitions(model.graph().gpu_tasks(), params.space.max_groups)) {
    count += allocations(nodes, static_cast<int>(partition.size()));
  }
  return count;
}

long long exhaustive_plan_count(const cost::CostModel& model, const workload::ModelCatalog& models,
                                const ExhaustiveParams& params) {
  if (exhaustive_allocation_count(model, params) > static_cast<double>(params.max_plans) * 16) {
    return params.max_plans * 16 + 1;  // each allocation is a plan at least, or none
  }
  long long count = 0;
  for (const auto& partition : partitions(model.graph().gpu_tasks(), params.space.max_groups)) {
    for_each_allocation(model, models, params.space, partition,
                        [&](std::vector<GroupChoice>&, const std::vector<std::vector<TaskChoice>>& choices) {
                          long long product = 1;
                          for (const auto& c : choices) product *= static_cast<long long>(c.size());
                          count += product;
                        });
    if (count > params.max_plans * 16) break;  // far past the limit: stop counting
  }
  return count;
}

PlannerResult plan_exhaustive(const cost::CostModel& model, const workload::ModelCatalog& models,
                              const ExhaustiveParams& params) {
  // Every allocation is visited, even one no strategy fits: refused before they are counted.
  if (const double visits = exhaustive_allocation_count(model, params); visits > static_cast<double>(params.max_plans)) {
    throw core::JobError(fmt::format(
        "the exhaustive planner would try {} allocations of the {} nodes to groups, more than its limit of {}; use "
        "it on fewer nodes or tasks, or another planner",
        std::isinf(visits) ? "over 1e30" : fmt::format("{:.0f}", visits), model.cluster().nodes.size(),
        params.max_plans));
  }
  const long long count = exhaustive_plan_count(model, models, params);
  if (count > params.max_plans) {
    throw core::JobError(fmt::format(
        "the exhaustive planner would price {}{} plans, more than its limit of {}; use it on "
        "fewer nodes or tasks, or another planner",
        count > params.max_plans * 16 ? "over " : "", count, params.max_plans));
  }
  require_prices(model.cluster(), params.goal);
  PlannerResult result;
  Rejections rejected;
  // The odometer below changes one task's strategy at a time: most groups were priced before.
  PlanPricer pricer(model, models);
  const auto explain = [&rejected](double overflow) { return rejected.keeps(overflow); };
  for (const auto& partition : partitions(model.graph().gpu_tasks(), params.space.max_groups)) {
    for_each_allocation(
        model, models, params.space, partition,
        [&](std::vector<GroupChoice>& groups, const std::vector<std::vector<TaskChoice>>& choices) {
          if (std::any_of(choices.begin(), choices.end(), [](const auto& c) { return c.empty(); })) return;
          std::vector<std::size_t> pick(choices.size(), 0);
          while (true) {
            std::size_t flat = 0;
            for (GroupChoice& g : groups) {
              g.choices.clear();
              for (std::size_t i = 0; i < g.tasks.size(); ++i, ++flat) {
                g.choices.push_back(choices[flat][pick[flat]]);
              }
            }
            if (pricer.price(groups, explain) != PlanPricer::Outcome::kNotLaidOut) {
              const plan::Prediction& prediction = pricer.prediction();
              ++result.evaluations;
              if (!params.goal.accepts(prediction)) {
                rejected.see(prediction);
              } else if (!result.found || params.goal.better(prediction, result.prediction)) {
                result.found = true;
                result.plan = pricer.plan();
                result.prediction = prediction;
              }
            }
            std::size_t i = 0;
            for (; i < pick.size(); ++i) {
              if (++pick[i] < choices[i].size()) break;
              pick[i] = 0;
            }
            if (i == pick.size()) break;
          }
        });
  }
  if (!result.found) result.why_not = rejected.why_not(params.goal);
  result.plan.planner.name = "exhaustive";
  result.plan.planner.stats = {{"plans", static_cast<double>(count)},
                               {"evaluations", static_cast<double>(result.evaluations)}};
  return result;
}

}  // namespace hetrl::planner
