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

std::string format_plan(const Plan& plan, const Prediction& prediction, const ReportContext& context,
                        bool explain);

}  // namespace hetrl::plan
