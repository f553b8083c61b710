#pragma once
// A plan made again after the cluster lost or gained nodes (hetrl-plan replan): what moved
// between the plan before and the plan after, and what the change costs.

#include <string>
#include <vector>

#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::plan {

// One GPU task in the plan before and after: its layout and the nodes it runs on.
struct TaskMove {
  std::string task;
  std::string before, after;  // "2 x TP4 on H100-SXM: h100-0, h100-1"
  bool moved = false;         // its GPUs or its layout changed
};

// Every GPU task of the graph in order. The two plans may be on different clusters (the same
// nodes by name, some gone or added): GPUs are compared by node name and device.
std::vector<TaskMove> task_moves(const Plan& before, const hw::Cluster& before_cluster, const Plan& after,
                                 const hw::Cluster& after_cluster, const workload::TaskGraph& graph);

struct ReplanSides {
  const Plan& plan;
  const Prediction& prediction;
  const hw::Cluster& cluster;
};

// The figures before and after with their change, the tasks that moved and those that kept
// their place; `what` says what changed ("without a100-1").
std::string format_replan(const ReplanSides& before, const ReplanSides& after, const workload::TaskGraph& graph,
                          const std::string& what);

}  // namespace hetrl::plan
