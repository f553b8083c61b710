#pragma once
// The plan as people read it: groups, GPUs, each task's layout and time, memory headroom and
// throughput; with explain, every term of every task's estimate.

#include <string>

#include "plan/evaluate.h"
#include "plan/plan.h"

namespace hetrl::plan {

struct ReportContext {
  std::string workload_name;
  const hw::Cluster& cluster;
  const workload::TaskGraph& graph;
  const workload::Workload& workload;
};

// A task's layout: "8 x TP2 on A100-SXM-80G + 2 x TP1 PP2 on L40S/L4".
std::string layout_text(const TaskPlacement& placement, const hw::Cluster& cluster);

std::string format_plan(const Plan& plan, const Prediction& prediction, const ReportContext& context,
                        bool explain);

}  // namespace hetrl::plan
