#pragma once
// What hetrl-plan compare writes with --json: hetrl.compare/v1, each cluster's summary
// (plan/compare.h) with the workload, planner and goal they were planned for.

#include <optional>
#include <string>
#include <vector>

#include "plan/compare.h"

namespace hetrl::io {

struct ComparisonInputs {
  std::string workload_name;
  std::string workload_hash;
  std::string planner;
  std::string objective;  // "throughput" or "cost"
  std::optional<double> budget_per_hour;
  std::optional<double> min_throughput;
  std::vector<std::string> cluster_hashes;  // as the rows
};

std::string comparison_json(const ComparisonInputs& inputs, const std::vector<plan::ClusterSummary>& rows);

}  // namespace hetrl::io
