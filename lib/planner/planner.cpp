#include "planner/planner.h"

#include <limits>

#include "core/error.h"

namespace hetrl::planner {

std::string_view objective_name(Objective objective) {
  return objective == Objective::kThroughput ? "throughput" : "cost_per_sample";
}

bool Goal::accepts(const plan::Prediction& p) const {
  if (!p.feasible) return false;
  if (min_throughput && p.samples_per_second < *min_throughput) return false;
  return !budget_per_hour || (p.price_per_hour && *p.price_per_hour <= *budget_per_hour);
}

double Goal::score(const plan::Prediction& p) const {
  if (!accepts(p)) return -std::numeric_limits<double>::infinity();
  if (objective == Objective::kCostPerSample) return -p.dollars_per_sample().value_or(0);
  return p.samples_per_second;
}

void require_prices(const hw::Cluster& cluster, const Goal& goal) {
  if (goal.needs_prices() && !cluster.price_per_hour()) {
    throw core::InputError(
        "the cost objective and --budget-per-hour need a price for every node; give prices in the "
        "cluster file (gpu_types, price_per_hour_usd) or with hetrl-cluster --gpu-price");
  }
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
