#pragma once
// What hetrl-exec writes: the report (hetrl.execreport/v1), each task's measured seconds per
// iteration next to the cost model's prediction for the same (scaled) workload.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exec/run.h"
#include "plan/evaluate.h"
#include "workload/model.h"

namespace hetrl::io {

struct ExecReportInputs {
  std::string plan_file;
  std::string plan_hash;  // of the plan file's text
  std::string cluster_hash;
  std::string workload_hash;
  std::string backend;  // the device that ran it, as the device layer names it
  std::string device;
  exec::RunSettings settings;  // iterations: the measured ones
  int warmup = 0;              // iterations run first and not measured
  double batch_scale = 1;
  std::vector<workload::ModelArch> models;  // what ran, per role that has a model
};

// `simulated`: per measured iteration, each task's simulated seconds (-1: none), or empty when
// the simulator did not run.
std::string exec_report_json(const ExecReportInputs& inputs, const exec::RunResult& run,
                             const plan::Prediction& predicted, const std::vector<std::vector<double>>& simulated,
                             const workload::TaskGraph& graph);

// What a report says of its run that a fit pools with another run of the same plan (hetrl-exec
// --fit-on): how the run was made, and per task each measured iteration's seconds and the parts
// a fit uses.
struct ExecRecord {
  std::string plan_hash;  // empty: written before reports named it
  std::string workload_hash;
  std::string backend, device, dtype;
  int iterations = 0;
  std::optional<int> warmup;  // none: written before reports named it
  unsigned long long seed = 0;
  double batch_scale = 1;
  std::vector<workload::ModelArch> models;
  struct Task {
    std::string name;
    std::vector<double> seconds;  // per measured iteration (0: not run)
    // Per measured iteration, the slowest replica's optimizer step (a training task) or
    // prefill (a generation task); empty where the report has no such part.
    std::vector<double> optimizer_steps, prefills;
    // Per measured iteration, a generation task's slowest replica's seconds in its decode
    // steps' TP all-reduces and their count; empty where the report has none (not timed).
    std::vector<double> decode_all_reduce;
    std::vector<long long> decode_all_reduces;
    // Per measured iteration, a scoring or training task's slowest replica's seconds in its
    // passes' TP all-reduces; empty where the report has none.
    std::vector<double> pass_all_reduce;
  };
  std::vector<Task> tasks;
};

// Reads what a fit needs of a report (hetrl.execreport/v1); the rest of it is the report's
// own. Throws core::InputError naming the file and the value.
ExecRecord parse_exec_report(std::string_view text, std::string_view file);
ExecRecord read_exec_report(const std::string& path);

}  // namespace hetrl::io
