#pragma once
// One workload's best plan on each of several clusters, side by side (hetrl-plan compare): what
// a capacity planner reads to choose between clusters. summarise() reduces a plan and its
// prediction to the figures compared; the table and the CSV are made from those alone (the
// JSON in io/compare_io.h).

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"
#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::plan {

struct ClusterSummary {
  std::string cluster;  // its name
  std::string file;     // where it was read from
  bool found = false;
  std::string why_not;  // when no plan was found
  double iteration_seconds = 0;
  double samples_per_second = 0;
  double tokens_per_second = 0;
  std::optional<double> plan_price_per_hour;     // the GPUs the plan uses
  std::optional<double> cluster_price_per_hour;  // every GPU of the cluster, used or not
  struct TypeUse {
    std::string gpu_type;
    int used = 0;
    int total = 0;
  };
  std::vector<TypeUse> gpus;  // per GPU type of the cluster, in its order
  int groups = 0;
  // What bounds the iteration: the longest task of the group busiest in it, and the slowest
  // transfer between groups (empty when nothing crosses between groups), with where it runs.
  std::string bottleneck_task;
  double bottleneck_task_seconds = 0;
  std::string bottleneck_link;
  double bottleneck_link_seconds = 0;
  double planning_seconds = 0;

  // USD per 1,000 samples at the plan's GPUs' price.
  std::optional<double> dollars_per_1k_samples() const {
    if (!found || !plan_price_per_hour || samples_per_second <= 0) return std::nullopt;
    return *plan_price_per_hour / core::kHour * 1000 / samples_per_second;
  }
};

// The summary of a plan that fit, from its prediction and the evaluation's transfer of each
// task graph edge (Evaluator::edge_transfers()).
ClusterSummary summarise(const Plan& plan, const Prediction& prediction, std::span<const double> edge_transfers,
                         const hw::Cluster& cluster, const workload::TaskGraph& graph);

// The summary of a cluster on which no plan was found, and why.
ClusterSummary no_plan(const hw::Cluster& cluster, const std::string& why_not);

// The comparison as a table: one row a cluster, each figure's change against the first
// cluster's where both have a plan.
std::string format_comparison(const std::vector<ClusterSummary>& rows, const std::string& workload_name);

// The same as CSV (RFC 4180: a header row, fields quoted where they hold a comma or a quote).
std::string comparison_csv(const std::vector<ClusterSummary>& rows);

}  // namespace hetrl::plan
