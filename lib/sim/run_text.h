#pragma once
// What hetrl-sim prints: a simulated run of a plan next to the cost model's prediction (where
// the time went, the busiest links), and several plans side by side on the same lengths.

#include <string>
#include <utility>
#include <vector>

#include "plan/evaluate.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace hetrl::sim {

struct PlanRun {
  SimSummary summary;
  Recorder recorder;
  plan::Prediction predicted;
};

// Predicts and simulates a plan, keeping every event. Throws core::JobError, naming `name`,
// when the plan does not fit.
PlanRun run_plan(const cost::CostModel& model, const plan::Plan& plan, const SimParams& params,
                 const std::string& name);

struct RunLabels {
  std::string plan;      // the plan file
  std::string workload;  // the workload's name
  std::string cluster;   // the cluster's name
};

std::string format_run(const PlanRun& run, const SimParams& params, const RunLabels& labels);
// `runs`: each plan file with its run.
std::string format_comparison(const std::vector<std::pair<std::string, PlanRun>>& runs, const SimParams& params,
                              const RunLabels& labels);

}  // namespace hetrl::sim
