#pragma once
// What hetrl-exec writes: the report (hetrl.execreport/v1), each task's measured seconds per
// iteration next to the cost model's prediction for the same (scaled) workload.

#include <string>

#include "exec/run.h"
#include "plan/evaluate.h"
#include "workload/model.h"

namespace hetrl::io {

struct ExecReportInputs {
  std::string plan_file;
  std::string cluster_hash;
  std::string workload_hash;
  std::string backend;  // the device that ran it, as the device layer names it
  std::string device;
  exec::RunSettings settings;
  double batch_scale = 1;
  std::vector<workload::ModelArch> models;  // what ran, per role that has a model
};

// `simulated`: per measured iteration, each task's simulated seconds (-1: none), or empty when
// the simulator did not run.
std::string exec_report_json(const ExecReportInputs& inputs, const exec::RunResult& run,
                             const plan::Prediction& predicted, const std::vector<std::vector<double>>& simulated,
                             const workload::TaskGraph& graph);

}  // namespace hetrl::io
