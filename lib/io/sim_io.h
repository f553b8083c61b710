#pragma once
// What hetrl-sim writes: the report (hetrl.simreport/v1) and a Chrome trace-event file that
// Perfetto opens, with one track per GPU group (a row per generation replica), one for the
// CPU and the weight sync, and one per link (its traffic in GB/s, and the transfers on it).

#include <string>

#include "plan/evaluate.h"
#include "sim/recorder.h"
#include "sim/simulator.h"

namespace hetrl::io {

struct SimReportInputs {
  std::string plan_file;
  std::string cluster_hash;
  std::string workload_hash;
  sim::SimParams params;
};

std::string sim_report_json(const SimReportInputs& inputs, const sim::SimSummary& summary,
                            const sim::Recorder& recorder, const plan::Prediction& predicted,
                            const workload::TaskGraph& graph);

std::string chrome_trace_json(const sim::Recorder& recorder, const sim::SimSummary& summary,
                              const workload::TaskGraph& graph, int groups);

}  // namespace hetrl::io
