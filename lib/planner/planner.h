#pragma once
// What every planner shares: the goal a plan is judged by (the objective and the constraints),
// the one rule that says which of two plans is better, and the result a planner returns with
// how its search ended. Planners never time anything: they compare the cost model's
// predictions (plan/evaluate.h), so their plans compare fairly.

#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::planner {

// Seconds a searching planner may take unless told otherwise.
inline constexpr double kDefaultTimeLimit = 60;

// What the searching planners optimise: samples per second, or dollars per sample.
enum class Objective { kThroughput, kCostPerSample };
std::string_view objective_name(Objective objective);  // "throughput", "cost_per_sample"

struct Goal {
  Objective objective = Objective::kThroughput;
  std::optional<double> budget_per_hour;  // USD: the plan's GPUs may cost at most this
  std::optional<double> min_throughput;   // samples/s: the plan must reach this

  bool constrained() const { return budget_per_hour || min_throughput; }
  // Whether a price an hour is within the budget, up to rounding in the sum of node prices (a
  // plan of two $40.97 nodes is within a budget of half four of them).
  bool within_budget(double price) const { return !budget_per_hour || price <= *budget_per_hour * (1 + 1e-9); }
  // The cost objective and a budget need every node's price.
  bool needs_prices() const { return objective == Objective::kCostPerSample || budget_per_hour; }
  // Whether the plan fits and meets the constraints.
  bool accepts(const plan::Prediction& p) const;
  // Higher is better: samples/s, or minus dollars per sample; -infinity for a plan the goal
  // does not accept.
  double score(const plan::Prediction& p) const;
  bool better(const plan::Prediction& a, const plan::Prediction& b) const { return score(a) > score(b); }
  // Why no plan on this cluster can meet the goal, whatever its layout (a budget below the
  // cheapest node's price); nullopt when some might.
  std::optional<std::string> unreachable(const hw::Cluster& cluster) const;
};

// What a search saw of the plans its goal did not accept, to say in one line why it found
// nothing: the plan closest to fitting in memory (the smallest overflow), and of the plans that
// fit, the cheapest and the fastest (a budget or a minimum throughput missed).
class Rejections {
 public:
  void see(const plan::Prediction& p);
  // Whether see() would keep a plan this far over a GPU's memory as the closest to fitting.
  bool keeps(double overflow) const { return closest_.empty() || overflow < closest_overflow_; }
  std::string why_not(const Goal& goal) const;

 private:
  bool seen_ = false;
  std::string closest_;
  double closest_overflow_ = 0;
  bool fit_ = false;
  double cheapest_ = 0;  // USD per hour, of the plans that fit
  double fastest_ = 0;   // samples/s, of the plans that fit
};

// Throws core::InputError when the goal needs prices and some node of the cluster has none.
void require_prices(const hw::Cluster& cluster, const Goal& goal);

// How a search ended.
enum class Stop {
  kComplete,   // it ran to its end: the plan is the best it can find (or there is none)
  kTimeLimit,  // the time limit stopped it: the best plan so far, if any
  kRefused,    // the instance is past what it can take (why_not says by how much)
};
std::string_view stop_name(Stop stop);
// Why a planner stopped by its time limit has no plan: "the time limit of N s passed before a
// plan was found<detail>; give it more time".
std::string late_why_not(double time_limit, std::string_view detail = {});

using core::Deadline;

struct PlannerResult {
  bool found = false;
  plan::Plan plan;
  plan::Prediction prediction;
  std::string why_not;  // when nothing was found: why, in one line
  long long evaluations = 0;
  Stop stop = Stop::kComplete;
  std::string summary;  // for people: one line on how the search went (the ILP's status, bound)
  // Figures of this run that depend on the machine or on the solver's path rather than on the
  // inputs: wall-clock seconds of its parts (the ILP's build and solve, its warm start), the
  // ILP's branch-and-bound nodes (other with several threads). For people and benchmarks, not
  // in the plan, whose bytes are the same on every run (hetrl-plan adds planning_seconds alone).
  std::vector<std::pair<std::string, double>> run_stats;
  std::optional<double> run_stat(std::string_view name) const {
    for (const auto& [key, value] : run_stats) {
      if (key == name) return value;
    }
    return std::nullopt;
  }
  // Files the planner made for the tool to write with its own outputs (the ILP's model as LP
  // or MPS): path and content.
  std::vector<std::pair<std::string, std::string>> files;
};

// All nodes of the cluster, in order.
std::vector<int> all_nodes(const hw::Cluster& cluster);

}  // namespace hetrl::planner
