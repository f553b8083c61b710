#include "planner/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace hetrl::planner {

std::string_view objective_name(Objective objective) {
  return objective == Objective::kThroughput ? "throughput" : "cost_per_sample";
}

bool Goal::accepts(const plan::Prediction& p) const {
  if (!p.feasible) return false;
  if (min_throughput && p.samples_per_second < *min_throughput) return false;
  return !budget_per_hour || (p.price_per_hour && within_budget(*p.price_per_hour));
}

double Goal::score(const plan::Prediction& p) const {
  if (!accepts(p)) return -std::numeric_limits<double>::infinity();
  if (objective == Objective::kCostPerSample) return -p.dollars_per_sample().value_or(0);
  return p.samples_per_second;
}

std::optional<std::string> Goal::unreachable(const hw::Cluster& cluster) const {
  if (!budget_per_hour) return std::nullopt;
  double cheapest = std::numeric_limits<double>::infinity();
  for (const hw::Node& node : cluster.nodes) cheapest = std::min(cheapest, cluster.node_price_per_hour(node).value_or(0));
  if (within_budget(cheapest)) return std::nullopt;
  return fmt::format("the budget of {} $/h is below the price of the cheapest node, {:.2f} $/h", *budget_per_hour,
                     cheapest);
}

void Rejections::see(const plan::Prediction& p) {
  if (!p.feasible) {
    if (closest_.empty() || p.overflow < closest_overflow_) {
      closest_ = p.infeasible;
      closest_overflow_ = p.overflow;
    }
  } else if (!fit_) {
    cheapest_ = p.price_per_hour.value_or(0);
    fastest_ = p.samples_per_second;
    fit_ = true;
  } else {
    cheapest_ = std::min(cheapest_, p.price_per_hour.value_or(0));
    fastest_ = std::max(fastest_, p.samples_per_second);
  }
  seen_ = true;
}

std::string Rejections::why_not(const Goal& goal) const {
  if (!seen_) return "no candidate could be laid out on the cluster";
  if (!fit_) return closest_;
  std::string out = "no plan meets the constraints";
  const bool over = !goal.within_budget(cheapest_);
  const bool under = goal.min_throughput && fastest_ < *goal.min_throughput;
  if (over) {
    out += fmt::format("; the cheapest plan that fits costs {:.2f} $/h, over the budget of {} $/h", cheapest_,
                       *goal.budget_per_hour);
  }
  if (under) {
    out += fmt::format("; the fastest plan that fits reaches {:.3g} samples/s, under the minimum of {}", fastest_,
                       *goal.min_throughput);
  }
  if (!over && !under) out += ": none that fits is both within the budget and fast enough";
  return out;
}

void require_prices(const hw::Cluster& cluster, const Goal& goal) {
  if (goal.needs_prices() && !cluster.price_per_hour()) {
    throw core::InputError(
        "the cost objective and --budget-per-hour need a price for every node; give prices in the "
        "cluster file (gpu_types, price_per_hour_usd) or with hetrl-cluster --gpu-price");
  }
}

std::string late_why_not(double time_limit, std::string_view detail) {
  return fmt::format("the time limit of {} s passed before a plan was found{}; give it more time", time_limit, detail);
}

std::string_view stop_name(Stop stop) {
  switch (stop) {
    case Stop::kComplete: return "complete";
    case Stop::kTimeLimit: return "time limit";
    case Stop::kRefused: return "refused";
  }
  return "?";
}

std::vector<int> all_nodes(const hw::Cluster& cluster) {
  std::vector<int> nodes(cluster.nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) nodes[n] = static_cast<int>(n);
  return nodes;
}

}  // namespace hetrl::planner
